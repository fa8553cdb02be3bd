package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HeapStats are the Go heap's spans in use and its live objects, after two
// garbage collections (the second one frees what the finalizers queued by
// the first released).
type HeapStats struct {
	Inuse, Live uint64
	// Goroutines counts the goroutines at the time.
	Goroutines int
}

// ReadHeap collects garbage and reads the heap.
func ReadHeap() HeapStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return HeapStats{Inuse: m.HeapInuse, Live: m.HeapAlloc, Goroutines: runtime.NumGoroutine()}
}

// RSS is this process's resident set size, from /proc/self/status VmRSS.
func RSS() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return procKiB(data, "VmRSS:")
}

// procKiB reads a "Name:   123 kB" line of a /proc file, in bytes.
func procKiB(data []byte, field string) (uint64, error) {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, field) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, field))
		if len(f) == 0 {
			break
		}
		kib, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return kib * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", field)
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc; 100 on every
// Linux architecture Go supports (it is not the kernel's HZ).
const clockTicks = 100

// CPUSample is the CPU time used so far by this process, by each of its
// child processes (the control plane: etcd, kube-apiserver,
// kube-controller-manager) and by the whole machine.
type CPUSample struct {
	At       time.Time
	Self     time.Duration
	Children map[string]time.Duration
	// MachineBusy and MachineTotal are the machine's non-idle and total CPU
	// time over all cores, from /proc/stat.
	MachineBusy, MachineTotal time.Duration
}

// SampleCPU reads the CPU times now.
func SampleCPU() (CPUSample, error) {
	s := CPUSample{At: time.Now(), Children: map[string]time.Duration{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s, err
	}
	s.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())

	self := os.Getpid()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // the process exited meanwhile
		}
		name, ppid, cpu, ok := parseProcStat(data)
		if ok && ppid == self {
			// comm is cut at 15 characters ("kube-controller"): name the
			// child by its executable instead.
			if cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline")); err == nil {
				if argv0, _, _ := bytes.Cut(cmdline, []byte{0}); len(argv0) > 0 {
					name = filepath.Base(string(argv0))
				}
			}
			s.Children[name] += cpu
		}
	}

	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return s, fmt.Errorf("unexpected /proc/stat: %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, err
		}
		// user nice system idle iowait irq softirq steal guest guest_nice:
		// guest time is already counted in user and nice; idle and iowait
		// are not busy; steal (a hypervisor's other guests) counts as busy.
		if i >= 8 {
			break
		}
		d := time.Duration(n) * time.Second / clockTicks
		s.MachineTotal += d
		if i != 3 && i != 4 {
			s.MachineBusy += d
		}
	}
	return s, nil
}

// parseProcStat reads the command name, parent and user+system CPU time
// from a /proc/PID/stat line. The name is in parentheses and may itself
// contain spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(data []byte) (name string, ppid int, cpu time.Duration, ok bool) {
	open := bytes.IndexByte(data, '(')
	end := bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	name = string(data[open+1 : end])
	f := strings.Fields(string(data[end+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseUint(f[11], 10, 64)
	stime, err3 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return name, ppid, time.Duration(utime+stime) * time.Second / clockTicks, true
}

// CPUUse is the CPU used between two samples.
type CPUUse struct {
	Wall     time.Duration
	Self     time.Duration
	Children map[string]time.Duration
	// Others is what the rest of the machine used (other work sharing it).
	Others time.Duration
	// MachineCores is the machine's CPU time over all cores in the interval.
	MachineCores time.Duration
}

// Since returns the CPU used from before to s.
func (s CPUSample) Since(before CPUSample) CPUUse {
	u := CPUUse{
		Wall:         s.At.Sub(before.At),
		Self:         s.Self - before.Self,
		Children:     map[string]time.Duration{},
		MachineCores: s.MachineTotal - before.MachineTotal,
	}
	busy := s.MachineBusy - before.MachineBusy
	ours := u.Self
	for name, v := range s.Children {
		d := v - before.Children[name]
		u.Children[name] = d
		ours += d
	}
	if busy > ours {
		u.Others = busy - ours
	}
	return u
}

// Machine describes the machine a run was made on.
type Machine struct {
	Cores    int
	MemTotal uint64
	CPUModel string
	Kernel   string
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages.
	LoadAvg string
}

// ReadMachine describes this machine.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		m.MemTotal, _ = procKiB(data, "MemTotal:")
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(bytes.NewReader(data))
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	m.LoadAvg = LoadAvg()
	return m
}

// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load averages.
func LoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
