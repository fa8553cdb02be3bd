package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/wrapup-dev/wrapup/test/framework"
)

// TestUpDown runs make up's and make down's scripts as an admin would use
// them: up, a sample rule and benchmark applied with the printed kubectl,
// the benchmark finished by wrapup as `kubectl get crec` shows, then down,
// after which nothing that up started runs.
func TestUpDown(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the suites with `make test`, which builds the local control plane (test/controlplane/build.sh)")
	}
	g := gomega.NewWithT(t)
	root := framework.RepoRoot()
	tmp := t.TempDir()
	plugin := filepath.Join(tmp, "kubectl-wrapup")
	build := exec.Command("go", "build", "-o", plugin, "./cmd/kubectl-wrapup")
	build.Dir = root
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(gomega.HaveOccurred(), "building kubectl-wrapup: %s", out)

	dir := filepath.Join(tmp, "up")
	script := func(name string) (string, error) {
		cmd := exec.Command(filepath.Join(root, "test", "up", name))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "UP_DIR="+dir, "PLUGIN="+plugin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out2, err := script("up.sh")
	// Whatever happens next, nothing up started outlives the test.
	t.Cleanup(func() {
		if _, err := os.Stat(dir); err == nil {
			_, _ = script("down.sh")
		}
	})
	g.Expect(err).NotTo(gomega.HaveOccurred(), "up.sh: %s", out2)
	g.Expect(out2).To(gomega.ContainSubstring("export KUBECONFIG=" + dir + "/kubeconfig PATH=" + dir + "/bin:$PATH"))

	started := []int{}
	for _, f := range []string{"up.pid", "pids"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, field := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(field)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			started = append(started, pid)
		}
	}
	// up itself, etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
	g.Expect(len(started)).To(gomega.BeNumerically(">=", 6))
	for _, pid := range started {
		g.Expect(running(pid, dir)).To(gomega.BeTrue(), "pid %d", pid)
	}

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command("kubectl", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "kubeconfig"),
			"PATH="+filepath.Join(dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out2, err = kubectl("get", "crules", "-o", "name")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out2)
	g.Expect(strings.Fields(out2)).To(gomega.ConsistOf("completionrule.wrapup.dev/annotated-triggers"), "the default rules")
	out2, err = kubectl("apply", "-f", "config/samples/benchmarks.yaml", "-f", "config/samples/appwrappers/llama-8b-sweep.yaml")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out2)

	g.Eventually(func(g gomega.Gomega) {
		out, err := kubectl("get", "crec", "-o", "jsonpath={range .items[*]}{.appWrapper.name} {.outcome} {.rule}{\"\\n\"}{end}")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		g.Expect(strings.TrimSpace(out)).To(gomega.Equal("llama-8b-sweep Succeeded benchmarks"))
		out, err = kubectl("get", "appwrappers", "-o", "name")
		g.Expect(err).NotTo(gomega.HaveOccurred(), out)
		g.Expect(strings.TrimSpace(out)).To(gomega.BeEmpty(), "the finished AppWrapper is still there")
	}, 3*time.Minute, time.Second).Should(gomega.Succeed())
	out2, err = kubectl("wrapup", "history")
	g.Expect(err).NotTo(gomega.HaveOccurred(), out2)
	g.Expect(out2).To(gomega.ContainSubstring("benchmark llama-8b-sweep-guidellm: 1 succeeded, 0 failed"))

	out2, err = script("down.sh")
	g.Expect(err).NotTo(gomega.HaveOccurred(), "down.sh: %s", out2)
	for _, pid := range started {
		g.Expect(running(pid, dir)).To(gomega.BeFalse(), "pid %d outlived make down", pid)
	}
	g.Expect(dir).NotTo(gomega.BeADirectory())
}

// running reports whether pid is a live process that runs from, or keeps
// its files in, dir (a pid that ended may be reused by another process).
func running(pid int, dir string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(cmdline), dir+"/")
}
