package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// PinApart gives the control plane (this process's child processes) CPU
// 0 and this process (wrapup, the plain client, the load) the other CPUs,
// as when wrapup runs on a node of its own: the API server's capacity is
// then one core that wrapup does not take from. It sets every thread's
// CPU set (sched_setaffinity(2) is per thread); threads made later inherit
// their creator's. A child started afterwards (kube-controller-manager
// restarted) starts with this process's set: call PinApart again.
func PinApart() error {
	n := runtime.NumCPU()
	if n < 2 {
		return fmt.Errorf("CPUs apart needs 2 CPUs or more, this machine has %d", n)
	}
	var plane, own unix.CPUSet
	plane.Set(0)
	for c := 1; c < n; c++ {
		own.Set(c)
	}
	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := 0
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited meanwhile
		}
		_, ppid, _, ok := parseProcStat(data)
		if !ok || ppid != self {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		if err := pinThreads(pid, &plane); err != nil {
			return err
		}
		children++
	}
	if children == 0 {
		return fmt.Errorf("CPUs apart: no control plane process is a child of this one")
	}
	// Twice: a thread made while the first pass ran may have copied the
	// set of a thread not pinned yet.
	for range 2 {
		if err := pinThreads(self, &own); err != nil {
			return err
		}
	}
	return nil
}

// pinThreads sets the CPU set of every thread of process pid.
func pinThreads(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pinning thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}
