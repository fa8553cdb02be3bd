#!/usr/bin/env bash
# make up: starts the local cluster of the demo (test/up, package test/bed)
# in the background and waits until it is ready, then says how to use it.
# UP_DIR is its state folder (kubeconfig, pids, log); PLUGIN the built
# kubectl-wrapup; KUBEBUILDER_ASSETS, when set, the control plane's folder
# (else test/controlplane/build.sh builds or finds it). test/up/down.sh
# stops it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${UP_DIR:-${root}/bin/up}"
plugin="${PLUGIN:-${root}/bin/kubectl-wrapup}"

# ours: the process runs from, or keeps its files in, this state folder.
ours() { [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "${dir}/"; }

usage() {
	cat <<USAGE
  export KUBECONFIG=${dir}/kubeconfig PATH=${dir}/bin:\$PATH
kubectl: $(readlink "${dir}/bin/kubectl"); kubectl-wrapup: $(readlink "${dir}/bin/kubectl-wrapup")
Then, from ${root}:
  kubectl get crules                                  # the default rule; add yours:
  kubectl apply -f config/samples/benchmarks.yaml     # finish llm-d benchmarks when their Job completes
  kubectl apply -f config/samples/appwrappers/        # two benchmarks for 8 GPUs: one runs, one queues
  kubectl get appwrappers,crec                        # watch the first finish and the second start
  kubectl wrapup explain qwen-32b-sweep               # what wrapup does with it, and why
  kubectl wrapup history
Its log: ${dir}/up.log. make down stops it.
USAGE
}

if [[ -f "${dir}/up.pid" ]] && ours "$(cat "${dir}/up.pid")"; then
	echo "up: already running; make down stops it"
	usage
	exit 0
fi
if [[ ! -x "${plugin}" ]]; then
	echo "up: no kubectl-wrapup at ${plugin} (make build-plugin)" >&2
	exit 1
fi
assets="${KUBEBUILDER_ASSETS:-$(WRAPUP_CONTROLPLANE_SKIP="helm lws" WRAPUP_CONTROLPLANE_QUIET=1 "${root}/test/controlplane/build.sh")}"

rm -rf "${dir}"
mkdir -p "${dir}/tmp" "${dir}/bin"
(cd "${root}" && go build -o "${dir}/wrapup-up" ./test/up)
ln -s "${assets}/kubectl" "${dir}/bin/kubectl"
ln -s "${plugin}" "${dir}/bin/kubectl-wrapup"

start=$SECONDS
TMPDIR="${dir}/tmp" KUBEBUILDER_ASSETS="${assets}" "${dir}/wrapup-up" -dir "${dir}" >"${dir}/up.log" 2>&1 </dev/null &
pid=$!
trap 'echo "up: interrupted; stopping"; UP_DIR="${dir}" "${root}/test/up/down.sh"; exit 130' INT TERM
until [[ -f "${dir}/ready" ]]; do
	if ! kill -0 "${pid}" 2>/dev/null || ((SECONDS - start > 600)); then
		echo "up: the local cluster did not start; the end of ${dir}/up.log:" >&2
		tail -n 40 "${dir}/up.log" >&2
		UP_DIR="${dir}" "${root}/test/up/down.sh" >&2
		exit 1
	fi
	sleep 0.2
done
trap - INT TERM
echo "up: the local cluster is up after $((SECONDS - start))s: kube-apiserver, etcd, kube-scheduler, kube-controller-manager,"
echo "kwok (node gpu-node-0, 8 GPUs), Kueue (ClusterQueue gpu-pool, LocalQueue default/benchmarks), the AppWrapper"
echo "controller and wrapup with its default rules. To use it:"
usage
