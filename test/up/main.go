// Command up runs the local cluster of `make up` (package bed) until it is
// sent SIGTERM or SIGINT (`make down`), then stops every process it started.
// test/up/up.sh starts it in the background and test/up/down.sh stops it.
// In -dir it writes:
//
//	up.pid      its own pid
//	kubeconfig  an admin kubeconfig for the cluster
//	pids        the pids of the processes it started (etcd, kube-apiserver,
//	            kube-controller-manager, kube-scheduler, kwok)
//	ready       once the cluster is ready for the samples
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/wrapup-dev/wrapup/test/bed"
)

func main() {
	dir := flag.String("dir", "", "the folder of the cluster's state (kubeconfig, pids, ready)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "up: -dir is required")
		os.Exit(2)
	}
	os.Exit(run(*dir))
}

func run(dir string) int {
	// A session of its own: closing the terminal that ran make up does not
	// stop the cluster (an error means it leads a group already).
	_, _ = syscall.Setsid()
	if err := os.WriteFile(filepath.Join(dir, "up.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "up: writing up.pid: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var b bed.Bed
	err := bed.Catch(func() { bed.Start(ctx, dir, &b) })
	if err == nil {
		err = bed.WritePids(filepath.Join(dir, "pids"))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "ready"), nil, 0o600)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "up: starting the local cluster: %v\n", err)
		shutdown(&b)
		return 1
	}
	fmt.Println("up: ready")
	go bed.TruncateLogBuffer(ctx, time.Minute)
	<-ctx.Done()
	fmt.Println("up: stopping")
	shutdown(&b)
	return 0
}

func shutdown(b *bed.Bed) {
	if err := bed.Catch(b.Stop); err != nil {
		fmt.Fprintf(os.Stderr, "up: stopping the local cluster: %v\n", err)
	}
	fmt.Println("up: stopped")
}
