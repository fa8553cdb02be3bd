package docs

import (
	"os"
	"path/filepath"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	awutils "github.com/project-codeflare/appwrapper/pkg/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestLeaderWorkerSetSamplesDeclareEveryPod: each LeaderWorkerSet that a
// sample wraps declares the pod sets of its leaders and workers with the
// counts its controller makes (spec.replicas leaders, spec.replicas *
// (size - 1) workers; spec.replicas * size from workerTemplate when there
// is no leaderTemplate), at paths the AppWrapper controller resolves, and
// the sample passes the AppWrapper webhook's pod-set checks (v1.2.2
// internal/webhook/appwrapper_webhook.go, validateAppWrapperCreate: the
// declared pod sets agree with the inferred ones, 1 to 8 in all). Nothing
// else checks these counts: the AppWrapper webhook infers none for a
// LeaderWorkerSet, so a wrong one is admitted and Kueue sizes it wrongly.
func TestLeaderWorkerSetSamplesDeclareEveryPod(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "leaderworkerset", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no sample in config/samples/leaderworkerset")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			aw := &awv1beta2.AppWrapper{}
			if err := yaml.UnmarshalStrict(data, aw); err != nil {
				t.Fatal(err)
			}
			sets, podSets := 0, 0
			for i, c := range aw.Spec.Components {
				obj := &unstructured.Unstructured{}
				if err := obj.UnmarshalJSON(c.Template.Raw); err != nil {
					t.Fatalf("component %d: %v", i, err)
				}
				inferred, err := awutils.InferPodSets(obj)
				if err != nil {
					t.Fatalf("component %d (%s): inferring its pod sets: %v", i, obj.GetKind(), err)
				}
				if err := awutils.ValidatePodSets(c.DeclaredPodSets, inferred); err != nil {
					t.Errorf("component %d (%s): %v", i, obj.GetKind(), err)
				}
				podSets += max(len(c.DeclaredPodSets), len(inferred))
				for _, ps := range c.DeclaredPodSets {
					if _, err := awutils.GetPodTemplateSpec(obj, ps.Path); err != nil {
						t.Errorf("component %d (%s): pod set %s: %v", i, obj.GetKind(), ps.Path, err)
					}
				}
				if obj.GetKind() != "LeaderWorkerSet" {
					continue
				}
				sets++
				want := leaderWorkerSetPodSets(t, obj)
				got := map[string]int32{}
				for _, ps := range c.DeclaredPodSets {
					got[ps.Path] = ptr.Deref(ps.Replicas, 1)
				}
				if len(got) != len(want) {
					t.Errorf("LeaderWorkerSet %s: pod sets %v, want %v", obj.GetName(), got, want)
				}
				for path, n := range want {
					if got[path] != n {
						t.Errorf("LeaderWorkerSet %s: pod set %s counts %d pods, its controller makes %d", obj.GetName(), path, got[path], n)
					}
				}
			}
			if sets == 0 {
				t.Error("the sample wraps no LeaderWorkerSet")
			}
			if podSets < 1 || podSets > 8 {
				t.Errorf("%d pod sets in all; an AppWrapper holds 1 to 8", podSets)
			}
		})
	}
}

// leaderWorkerSetPodSets is what a LeaderWorkerSet's controller makes, by
// pod template path in its AppWrapper component: its leader StatefulSet
// has spec.replicas pods from leaderTemplate (from workerTemplate when it
// has none), and each group's worker StatefulSet size - 1 pods from
// workerTemplate (sigs.k8s.io/lws pkg/controllers
// leaderworkerset_controller.go and pod_controller.go).
func leaderWorkerSetPodSets(t *testing.T, lws *unstructured.Unstructured) map[string]int32 {
	t.Helper()
	replicas, found, err := unstructured.NestedInt64(lws.Object, "spec", "replicas")
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		replicas = 1
	}
	size, found, err := unstructured.NestedInt64(lws.Object, "spec", "leaderWorkerTemplate", "size")
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		size = 1
	}
	const (
		leader = "template.spec.leaderWorkerTemplate.leaderTemplate"
		worker = "template.spec.leaderWorkerTemplate.workerTemplate"
	)
	if _, has, _ := unstructured.NestedMap(lws.Object, "spec", "leaderWorkerTemplate", "leaderTemplate"); !has {
		return map[string]int32{worker: int32(replicas * size)}
	}
	if size == 1 {
		return map[string]int32{leader: int32(replicas)}
	}
	return map[string]int32{leader: int32(replicas), worker: int32(replicas * (size - 1))}
}
