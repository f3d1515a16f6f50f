# agent
