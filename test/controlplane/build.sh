#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and
# etcd from the Go module proxy, and helm and kwok (each in its own module
# under test/tools), and caches them outside the work tree, keyed by version,
# so that a fresh clone (CI) and every later run reuse them. Prints the folder
# that holds the binaries (the value for KUBEBUILDER_ASSETS) on stdout;
# progress goes to stderr.
#
# WRAPUP_CONTROLPLANE_SKIP names binaries not to build, such as "helm", which
# make demo and make up do not use. WRAPUP_CONTROLPLANE_QUIET=1 says nothing
# of what is cached, only of what it builds.
#
# The first build takes about 17-22 minutes on 2 cores (kube-apiserver alone ~7-10).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

cached() {
	if [[ -z "${WRAPUP_CONTROLPLANE_QUIET:-}" ]]; then
		echo "controlplane: $1 cached in ${out}" >&2
	fi
}

# WRAPUP_CONTROLPLANE_MODULE is the folder, under this one, of the module
# that pins the release to build: "." (v1.37.2), or "oldest" (the oldest
# minor the chart claims, for make test-oldest).
module="${WRAPUP_CONTROLPLANE_MODULE:-.}"
k8s_version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "${module}/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "${module}/go.mod")"
cache_root="${WRAPUP_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wrapup}"
out="${cache_root}/controlplane-${k8s_version}-etcd-${etcd_version}"
mkdir -p "$out"

# One build at a time per cache folder: a second caller waits for the first.
exec 9>"${out}/.lock"
if ! flock -n 9; then
	# Another build (another make, a test suite) holds the folder: say so,
	# rather than look hung, and wait for it.
	echo "controlplane: waiting for another build of ${out} to finish (its lock ${out}/.lock)" >&2
	flock 9
fi

k8s_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${k8s_version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2) \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=${k8s_version} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"

build() {
	local name="$1" pkg="$2" ldflags="$3"
	if [[ " ${WRAPUP_CONTROLPLANE_SKIP:-} " == *" ${name} "* ]]; then
		return
	fi
	if [[ -x "${out}/${name}" ]]; then
		cached "${name} ${k8s_version}"
		return
	fi
	echo "controlplane: building ${name} (${pkg}); the first build of the control plane takes ~17-22 minutes on 2 cores" >&2
	local start=$SECONDS
	(cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "${out}/.${name}.tmp" "$pkg")
	mv -f "${out}/.${name}.tmp" "${out}/${name}"
	echo "controlplane: built ${name} in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$k8s_ldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"

# Tools whose Kubernetes libraries differ from the project's and the control
# plane's, each built in a module of its own under ../tools and cached beside
# the others under its own version: helm (the chart's tests), kwok
# (simulated nodes and pods for the test bed that runs pods) and lws.
tool() {
	local name="$1" module="$2" pkg="$3" ldflags="$4"
	if [[ " ${WRAPUP_CONTROLPLANE_SKIP:-} " == *" ${name} "* ]]; then
		return
	fi
	local version
	version="$(awk -v m="$module" '{for (i = 1; i < NF; i++) if ($i == m) {print $(i+1); exit}}' "../tools/${name}/go.mod")"
	if [[ -x "${out}/${name}" && "$(cat "${out}/.${name}.version" 2>/dev/null)" == "$version" ]]; then
		cached "${name} ${version}"
		return
	fi
	echo "controlplane: building ${name} ${version} (test/tools/${name})" >&2
	local start=$SECONDS
	(cd "../tools/${name}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${ldflags//VERSION/$version}" -o "${out}/.${name}.tmp" "$pkg")
	mv -f "${out}/.${name}.tmp" "${out}/${name}"
	echo "$version" > "${out}/.${name}.version"
	echo "controlplane: built ${name} in $((SECONDS - start))s" >&2
}
tool helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=VERSION"
tool kwok sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok "-X sigs.k8s.io/kwok/pkg/consts.Version=VERSION"
# The LeaderWorkerSet controller manager (controllers and webhooks), for the
# bed's LeaderWorkerSet specs (test/framework/leaderworkerset.go): ~7 minutes
# the first time on 2 cores.
tool lws sigs.k8s.io/lws sigs.k8s.io/lws/cmd "-X sigs.k8s.io/lws/pkg/version.GitVersion=VERSION"

echo "$out"
