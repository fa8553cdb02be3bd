//go:build tools

// Package oldest pins the sources of the control plane of the oldest
// Kubernetes minor the chart claims (kube-apiserver, kube-controller-manager
// and etcd), which `make test-oldest` runs the integration suite against;
// see ../build.sh (WRAPUP_CONTROLPLANE_MODULE=oldest).
package oldest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
