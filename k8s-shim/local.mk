# slurm-k8s-shim
