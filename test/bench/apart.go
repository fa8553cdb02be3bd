package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// PinApart gives the control plane (this process's child processes) the
// first CPU this process may use and this process (wrapup, the plain
// client, the load) the others, as when wrapup runs on a node of its own:
// kube-apiserver, etcd and kube-controller-manager then share one core
// that wrapup does not take from. It sets every thread's CPU set
// (sched_setaffinity(2) is per thread), in passes until one finds nothing
// to change: a thread made during a pass copies its creator's set, which
// may not be pinned yet. A child started afterwards (kube-controller-manager
// restarted) starts with this process's set: call PinApart again. Go
// programs follow their CPU set with GOMAXPROCS (1 each for the control
// plane's, on a machine of 2).
func PinApart() error {
	apart.once.Do(func() { apart.plane, apart.own, apart.err = apartSets() })
	if apart.err != nil {
		return apart.err
	}
	plane, own := apart.plane, apart.own
	self := os.Getpid()
	children, err := childProcesses(self)
	if err != nil {
		return err
	}
	if len(children) == 0 {
		return fmt.Errorf("CPUs apart: no control plane process is a child of this one")
	}
	for pass := 0; ; pass++ {
		changed := 0
		for _, pid := range children {
			n, err := pinThreads(pid, &plane)
			if err != nil {
				return err
			}
			changed += n
		}
		n, err := pinThreads(self, &own)
		if err != nil {
			return err
		}
		changed += n
		if changed == 0 {
			return nil
		}
		if pass == 20 {
			return fmt.Errorf("CPUs apart: threads still made with other CPU sets after %d passes", pass)
		}
	}
}

// apart are the CPU sets PinApart gives, from the CPUs this process could
// use before its first call (after it, this process has fewer).
var apart struct {
	once       sync.Once
	plane, own unix.CPUSet
	err        error
}

// apartSets splits the CPUs this process may use: the first for the
// control plane, the others for this process.
func apartSets() (plane, own unix.CPUSet, err error) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return plane, own, err
	}
	first := -1
	for c := 0; c < len(allowed)*64; c++ {
		if !allowed.IsSet(c) {
			continue
		}
		if first < 0 {
			first = c
			plane.Set(c)
		} else {
			own.Set(c)
		}
	}
	if own.Count() == 0 {
		return plane, own, fmt.Errorf("CPUs apart needs 2 CPUs or more, this process may use %d", allowed.Count())
	}
	return plane, own, nil
}

// childProcesses lists the processes whose parent is pid.
func childProcesses(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited meanwhile
		}
		_, ppid, _, ok := parseProcStat(data)
		if !ok || ppid != pid {
			continue
		}
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err == nil {
			children = append(children, child)
		}
	}
	return children, nil
}

// pinThreads sets the CPU set of every thread of process pid that does
// not have it yet, and returns how many it set.
func pinThreads(pid int, set *unix.CPUSet) (int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	changed := 0
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		var now unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &now); err == nil && now == *set {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			if err == unix.ESRCH {
				continue // the thread exited meanwhile
			}
			return changed, fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
		}
		changed++
	}
	return changed, nil
}
