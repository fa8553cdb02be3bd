package bench

import (
	"github.com/wrapup-dev/wrapup/test/framework"
	"k8s.io/client-go/discovery"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// OwnConnection returns a copy of cfg whose clients get an HTTP transport,
// and so connections, of their own, as a separate process's would: client-go
// shares one transport (one HTTP/2 connection) between configs with the
// same TLS settings, and the benchmark, the AppWrapper controller and
// wrapup must neither queue behind each other's requests nor share
// connection goroutines in a CPU profile. A Dial function makes the
// transport uncacheable, hence new.
func OwnConnection(cfg *rest.Config, userAgent string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.UserAgent = userAgent
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return c
}

// Parallel runs fn over items with n workers and returns the first error.
func Parallel[T any](n int, items []T, fn func(T) error) error {
	ch := make(chan T)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range ch {
				if err := fn(x); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, x := range items {
		ch <- x
	}
	close(ch)
	wg.Wait()
	return first
}

// Versions names what the run used: the API server's version from
// discovery, the modules' from the module graph (a test binary's build
// information lists no dependencies).
func Versions(cfg *rest.Config) map[string]string {
	v := map[string]string{"server": "unknown", "go": runtime.Version()}
	if dc, err := discovery.NewDiscoveryClientForConfig(cfg); err == nil {
		if info, err := dc.ServerVersion(); err == nil {
			v["server"] = info.GitVersion
		}
	}
	// The commit the run measured, "-dirty" with uncommitted changes.
	cmd := exec.Command("git", "describe", "--always", "--dirty")
	cmd.Dir = framework.RepoRoot()
	if out, err := cmd.Output(); err == nil {
		v["wrapup"] = strings.TrimSpace(string(out))
	} else {
		v["wrapup"] = "unknown"
	}
	for name, module := range map[string]string{
		"appwrapper":         "github.com/project-codeflare/appwrapper",
		"controller-runtime": "sigs.k8s.io/controller-runtime",
		"client-go":          "k8s.io/client-go",
	} {
		cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module)
		cmd.Dir = framework.RepoRoot()
		out, err := cmd.Output()
		if err != nil {
			out = []byte("unknown")
		}
		v[name] = strings.TrimSpace(string(out))
	}
	return v
}
