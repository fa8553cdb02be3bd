package read

import (
	"context"
	"fmt"
	"slices"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/wrapup-dev/wrapup/gc/decision"
)

// KubeconfigKey is the key of a worker's kubeconfig in its Secret.
const KubeconfigKey = "kubeconfig"

// WorkloadOwnerIndex indexes Kueue Workloads by the UID of the object that
// controls them: an AppWrapper's Workload, whose name Kueue derives.
const WorkloadOwnerIndex = "wrapup.dev/controller-uid"

// FindWorkload finds the Workload of aw (on this cluster): by the
// controller index in cache, then, when live is set, read from it.
func FindWorkload(ctx context.Context, cache, live client.Reader, aw *awv1beta2.AppWrapper) (*kueue.Workload, error) {
	var list kueue.WorkloadList
	if err := cache.List(ctx, &list, client.InNamespace(aw.Namespace), client.MatchingFields{WorkloadOwnerIndex: string(aw.UID)}); err != nil {
		return nil, fmt.Errorf("finding the AppWrapper's Workload: %w", err)
	}
	if len(list.Items) == 0 && live != nil {
		// Not in the cache yet: the final check asks the API server.
		var all kueue.WorkloadList
		if err := live.List(ctx, &all, client.InNamespace(aw.Namespace)); err != nil {
			return nil, fmt.Errorf("listing the Workloads of namespace %s: %w", aw.Namespace, err)
		}
		for _, wl := range all.Items {
			if uids := WorkloadController(&wl); len(uids) == 1 && uids[0] == string(aw.UID) {
				list.Items = append(list.Items, wl)
			}
		}
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	// Kueue makes one Workload per AppWrapper; the newest is the one in use.
	wl := slices.MaxFunc(list.Items, func(a, b kueue.Workload) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	if live == nil {
		return &wl, nil
	}
	return getOrNil(ctx, live, client.ObjectKeyFromObject(&wl), &kueue.Workload{}, "the AppWrapper's Workload "+wl.Name)
}

// WorkloadController is the index function of WorkloadOwnerIndex.
func WorkloadController(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "AppWrapper" {
		return []string{string(ref.UID)}
	}
	return nil
}

// WorkerOf is what a decision needs of the worker of aw, whose Workload
// here is wl (nil: none; werr: it could not be read): the worker it is
// dispatched to and the copy there, read through connect's reader.
func WorkerOf(ctx context.Context, aw *awv1beta2.AppWrapper, wl *kueue.Workload, werr error, connect func(cluster string) (client.Reader, error)) *decision.Worker {
	if werr != nil {
		return &decision.Worker{Problem: werr.Error()}
	}
	w := &decision.Worker{}
	if wl == nil {
		return w
	}
	w.Workload = wl.Name
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		w.Finished, w.FinishedReason = true, c.Reason
	}
	if wl.Status.ClusterName == nil || *wl.Status.ClusterName == "" {
		return w
	}
	w.Cluster = *wl.Status.ClusterName
	reader, err := connect(w.Cluster)
	if err != nil {
		w.Problem = err.Error()
		return w
	}
	if w.AppWrapper, err = getOrNil(ctx, reader, client.ObjectKeyFromObject(aw), &awv1beta2.AppWrapper{}, "the AppWrapper on worker cluster "+w.Cluster); err != nil {
		w.Problem = err.Error()
	}
	return w
}
