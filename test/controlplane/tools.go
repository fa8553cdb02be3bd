//go:build tools

// Package controlplane pins the sources of the local Kubernetes control plane
// (kube-apiserver, kube-controller-manager, kube-scheduler and etcd) that the
// test suites run, and of kubectl, with which the install is applied as an
// admin applies it.
// The binaries cannot be downloaded on the machines this project is built on,
// so they are compiled from the Go module proxy; see build.sh.
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
