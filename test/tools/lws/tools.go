//go:build tools

// Package lws pins the LeaderWorkerSet controller manager (its controllers
// and webhooks, sigs.k8s.io/lws/cmd), which test/controlplane/build.sh
// builds for the test bed that runs pods, in a module of its own: its
// controller-runtime (v0.21) and Kubernetes libraries (v0.33) differ from
// the project's, whose Kueue requires a later LeaderWorkerSet module, and
// its webhook package does not build against the project's
// controller-runtime.
package lws

import _ "sigs.k8s.io/lws/cmd"
