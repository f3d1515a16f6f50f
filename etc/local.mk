# etc
