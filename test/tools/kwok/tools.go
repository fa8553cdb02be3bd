//go:build tools

// Package kwok pins kwok (simulated nodes and pod lifecycles), which
// test/controlplane/build.sh builds for the test bed that runs pods, in a
// module of its own: kwok's Kubernetes libraries differ from the project's.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
