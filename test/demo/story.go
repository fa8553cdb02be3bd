package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/onsi/gomega"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/test/bed"
	"github.com/wrapup-dev/wrapup/test/framework"
	"github.com/wrapup-dev/wrapup/test/util"
)

// The samples the demo applies, as an admin and a user would.
const (
	ruleFile   = "config/samples/benchmarks.yaml"
	firstFile  = "config/samples/appwrappers/llama-8b-sweep.yaml"
	secondFile = "config/samples/appwrappers/qwen-32b-sweep.yaml"
	first      = "llama-8b-sweep"
	second     = "qwen-32b-sweep"
	rule       = "benchmarks"
)

// stepTimeout bounds each wait of the story, which the whole chain of
// controllers takes, on a loaded machine.
const stepTimeout = 3 * time.Minute

// pollEvery is how often the demo looks at the handoff.
const pollEvery = 10 * time.Millisecond

// story is one run of the demo.
type story struct {
	ctx context.Context
	out io.Writer
	c   client.Client
	// env runs kubectl against the bed, with the plugin on its PATH.
	env []string
}

// Run tells the story on a bed of its own, writing it to out, and stops the
// bed before it returns.
func Run(ctx context.Context, out io.Writer, plugin string) error {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: make demo sets it (test/controlplane/build.sh)")
	}
	dir, err := os.MkdirTemp("", "wrapup-demo-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return err
	}
	plugin, err = filepath.Abs(plugin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(plugin); err != nil {
		return fmt.Errorf("the plugin (make build-plugin): %w", err)
	}
	for name, target := range map[string]string{"kubectl": filepath.Join(assets, "kubectl"), "kubectl-wrapup": plugin} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			return err
		}
	}

	s := &story{ctx: ctx, out: out}
	var b bed.Bed
	err = bed.Catch(func() {
		s.start(dir, &b)
		s.env = append(os.Environ(), "KUBECONFIG="+b.Kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		s.tell(&b)
	})
	if stopErr := bed.Catch(b.Stop); err == nil {
		err = stopErr
	}
	if err == nil {
		s.say("The local cluster is stopped. To keep exploring, `make up` starts it and leaves it running, with the")
		s.say("samples of config/samples/appwrappers to apply; `make down` stops it.")
	}
	return err
}

func (s *story) say(format string, args ...any) {
	fmt.Fprintf(s.out, format+"\n", args...)
}

// step starts a part of the story.
func (s *story) step(format string, args ...any) {
	s.say("")
	s.say(format, args...)
}

// run runs an admin's command, from the repository's root, and shows it
// with its output.
func (s *story) run(args ...string) {
	s.say("  $ %s", strings.Join(args, " "))
	cmd := exec.CommandContext(s.ctx, args[0], args[1:]...)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		s.say("    %s", line)
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s: %s", strings.Join(args, " "), out)
}

func (s *story) start(dir string, b *bed.Bed) {
	s.say("wrapup demo: a finished benchmark hands its GPUs to the next one in the Kueue queue.")
	s.say("")
	s.say("Starting a local cluster: etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok (a fake GPU")
	s.say("node), Kueue, the AppWrapper controller, and wrapup with its default rules (config/rules).")
	began := time.Now()
	bed.Start(s.ctx, dir, b)
	s.c = b.Client
	s.say("Up in %.0fs: node %s with %d GPUs; Kueue ClusterQueue %s of %d GPUs, LocalQueue %s/%s.",
		time.Since(began).Seconds(), b.Node, bed.NodeGPUs, bed.ClusterQueue, bed.NodeGPUs, bed.Namespace, bed.LocalQueue)
}

func (s *story) tell(b *bed.Bed) {
	ctx, c := s.ctx, s.c

	s.step("1. The admin writes a rule: when an llm-d benchmark's guidellm Job completes, delete its AppWrapper.")
	s.run("kubectl", "apply", "-f", ruleFile)
	s.ruleStatus(func(r *wrapupv1alpha1.CompletionRule) bool {
		return apimeta.IsStatusConditionTrue(r.Status.Conditions, wrapupv1alpha1.ConditionReady)
	})
	s.run("kubectl", "get", "crules")
	s.say("  Ready: its expressions compiled. The default install's rule, annotated-triggers, finishes AppWrappers")
	s.say("  whose components are annotated wrapup.dev/trigger; benchmarks wins for its AppWrappers (priority 10).")

	s.step("2. A user submits a benchmark: two vLLM Deployments (2 GPUs each) and a guidellm Job (4 GPUs).")
	s.run("kubectl", "apply", "-f", firstFile)
	firstAW := s.appWrapper(first)
	util.ExpectWorkloadCondition(ctx, c, firstAW, kueue.WorkloadAdmitted, "True")
	util.ExpectPodsRunning(ctx, c, bed.Namespace, first, b.Node, 3, stepTimeout)
	s.run("kubectl", "get", "pods")
	s.say("  Kueue admitted it; its pods hold all %d GPUs of %s. The vLLM servers would run forever.", bed.NodeGPUs, b.Node)

	// From here the demo watches the handoff in the background, so that
	// the commands it shows meanwhile cannot delay what it sees.
	handoff := make(chan timeline, 1)
	go func() { handoff <- s.watch(firstAW) }()

	s.step("3. A second benchmark queues: no GPUs are left.")
	s.run("kubectl", "apply", "-f", secondFile)
	secondAW := s.appWrapper(second)
	util.ExpectWorkloadCondition(ctx, c, secondAW, kueue.WorkloadQuotaReserved, "False")
	s.run("kubectl", "get", "appwrappers")
	s.run("kubectl", "wrapup", "explain", second)
	s.say("  explain says which rule wins and why the other does not apply, which component is the trigger, and")
	s.say("  what wrapup waits for: Kueue admits the AppWrapper, then its Job exists and finishes.")

	s.step("4. guidellm finishes. wrapup records the run, deletes the AppWrapper, and the next benchmark starts.")
	var t timeline
	select {
	case t = <-handoff:
	case <-time.After(2 * stepTimeout):
		gomega.Expect(errors.New("timed out")).NotTo(gomega.HaveOccurred(), "watching the handoff")
	}
	gomega.Expect(t.err).NotTo(gomega.HaveOccurred(), "watching the handoff")
	s.run("kubectl", "get", "crec")
	s.say("  The run's CompletionRecord, written before the delete, outlives the AppWrapper: its outcome and message.")
	s.run("kubectl", "wrapup", "history")
	s.run("kubectl", "get", "pods")
	s.ruleStatus(func(r *wrapupv1alpha1.CompletionRule) bool {
		return r.Status.Succeeded == 1 && r.Status.MatchedAppWrappers == 1
	})
	s.run("kubectl", "get", "crules")
	s.say("  The rule counts the runs it finished (Succeeded) and the AppWrappers it applies to now (Matched).")

	s.step("5. The handoff, as this demo saw it (it looks every %d ms), in ms after the Job completed:", pollEvery.Milliseconds())
	for i, m := range t.marks {
		s.say("  %-62s %6d", m.what, m.at.Sub(t.marks[0].at).Milliseconds())
		if i == len(t.marks)-1 {
			s.say("  The GPUs were idle %d ms: the next benchmark ran without anyone tearing anything down.", m.at.Sub(t.marks[0].at).Milliseconds())
		}
	}
	s.say("")
}

// appWrapper reads a sample AppWrapper the story applied.
func (s *story) appWrapper(name string) *awv1beta2.AppWrapper {
	aw := &awv1beta2.AppWrapper{}
	gomega.Expect(s.c.Get(s.ctx, client.ObjectKey{Namespace: bed.Namespace, Name: name}, aw)).To(gomega.Succeed())
	return aw
}

// ruleStatus waits until the sample rule's status is as ok says.
func (s *story) ruleStatus(ok func(*wrapupv1alpha1.CompletionRule) bool) {
	gomega.Eventually(func(g gomega.Gomega) {
		r := &wrapupv1alpha1.CompletionRule{}
		g.Expect(s.c.Get(s.ctx, client.ObjectKey{Name: rule}, r)).To(gomega.Succeed())
		g.Expect(ok(r)).To(gomega.BeTrue(), "rule %s: %+v", rule, r.Status)
	}, stepTimeout, util.Interval).Should(gomega.Succeed())
}

// mark is when the demo first saw a step of the handoff.
type mark struct {
	what string
	at   time.Time
}

// timeline is the handoff's steps in order, or why it was not seen.
type timeline struct {
	marks []mark
	err   error
}

// watch looks every pollEvery at the handoff of firstAW's GPUs to the second
// sample, and returns when it saw each step.
func (s *story) watch(firstAW *awv1beta2.AppWrapper) timeline {
	ctx, c := s.ctx, s.c
	job := client.ObjectKey{Namespace: bed.Namespace, Name: first + "-guidellm"}
	steps := []struct {
		what string
		seen func() (bool, error)
	}{
		{first + "'s trigger, Job " + job.Name + ", Complete", func() (bool, error) {
			j := &batchv1.Job{}
			if err := c.Get(ctx, job, j); err != nil {
				return false, err
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}},
		{"wrapup deleted AppWrapper " + first + " (released)", func() (bool, error) {
			aw := &awv1beta2.AppWrapper{}
			err := c.Get(ctx, client.ObjectKeyFromObject(firstAW), aw)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && !aw.DeletionTimestamp.IsZero(), err
		}},
		{"its pods gone (the AppWrapper controller tore it down)", func() (bool, error) {
			return len(util.PodsOf(ctx, c, bed.Namespace, first)) == 0, nil
		}},
		{"its quota freed (Kueue's Workload for it gone)", func() (bool, error) {
			wl, err := util.WorkloadFor(ctx, c, firstAW)
			return err == nil && (wl == nil || !wl.DeletionTimestamp.IsZero() ||
				!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)), err
		}},
		{"Kueue admitted " + second, func() (bool, error) {
			aw := &awv1beta2.AppWrapper{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: bed.Namespace, Name: second}, aw); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			wl, err := util.WorkloadFor(ctx, c, aw)
			return err == nil && wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted), err
		}},
		{second + "'s pods Running on the freed GPUs", func() (bool, error) {
			pods := util.PodsOf(ctx, c, bed.Namespace, second)
			running := 0
			for _, p := range pods {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running == 3, nil
		}},
	}
	var t timeline
	t.err = bed.Catch(func() {
		deadline := time.Now().Add(2 * stepTimeout)
		for next := 0; next < len(steps); {
			if time.Now().After(deadline) {
				gomega.Expect(next).To(gomega.Equal(len(steps)), "the handoff stopped after %d of its steps", next)
			}
			seen, err := steps[next].seen()
			if err != nil && ctx.Err() != nil {
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
			}
			if seen {
				t.marks = append(t.marks, mark{steps[next].what, time.Now()})
				next++
				continue
			}
			time.Sleep(pollEvery)
		}
	})
	return t
}
