# k8s-shim
