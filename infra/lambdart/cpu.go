package lambdart

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MemoryPerVCPU is the memory size at which a Lambda function has the
// equivalent of one vCPU; its CPU share is proportional to its memory
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
const MemoryPerVCPU = 1769

// cfsPeriod is the CFS bandwidth period the quota is a share of (the
// kernel's default, 100 ms). How Lambda slices its share in time is not
// documented; the share itself is.
const cfsPeriod = 100 * time.Millisecond

// CPUShare is a cgroup holding processes to the CPU share Lambda gives a
// function of a memory size: quota = period × MemorySize / 1769. It uses
// cgroup v2's cpu.max when /sys/fs/cgroup is the unified hierarchy, else
// cgroup v1's cpu controller (cpu.cfs_quota_us) and cpuacct controller
// (for the usage). Creating it needs write access to the cgroup file
// system (root, or a delegated subtree).
type CPUShare struct {
	// VCPUs is the share, in CPUs.
	VCPUs float64
	// dirs: the cgroup's directories (v2: one; v1: cpu, cpuacct).
	dirs []string
	v2   bool
}

// NewCPUShare creates the cgroup name (under the root of each hierarchy)
// for a function of memoryMB.
func NewCPUShare(name string, memoryMB int) (*CPUShare, error) {
	const root = "/sys/fs/cgroup"
	s := &CPUShare{VCPUs: float64(memoryMB) / MemoryPerVCPU}
	quota := time.Duration(float64(cfsPeriod) * s.VCPUs)
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		s.v2 = true
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup v2: %w", err)
		}
		s.dirs = []string{dir}
		// The cpu controller must be enabled for the root's children.
		if err := os.WriteFile(filepath.Join(root, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			s.Close()
			return nil, fmt.Errorf("cgroup v2: enable the cpu controller: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota.Microseconds(), cfsPeriod.Microseconds()), 0); err != nil {
			s.Close()
			return nil, fmt.Errorf("cgroup v2: cpu.max: %w", err)
		}
		return s, nil
	}
	for _, ctl := range []string{"cpu", "cpuacct"} {
		dir := filepath.Join(root, ctl, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			s.Close()
			return nil, fmt.Errorf("cgroup v1 (no cgroup v2 at %s): %w", root, err)
		}
		s.dirs = append(s.dirs, dir)
	}
	for file, v := range map[string]int64{"cpu.cfs_period_us": cfsPeriod.Microseconds(), "cpu.cfs_quota_us": quota.Microseconds()} {
		if err := os.WriteFile(filepath.Join(s.dirs[0], file), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
			s.Close()
			return nil, fmt.Errorf("cgroup v1: %s: %w", file, err)
		}
	}
	return s, nil
}

// Add moves process pid (all its threads) into the cgroup.
func (s *CPUShare) Add(pid int) error {
	for _, dir := range s.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup %s: add %d: %w", dir, pid, err)
		}
	}
	return nil
}

// Usage is the CPU time the cgroup's processes have used.
func (s *CPUShare) Usage() (time.Duration, error) {
	if s.v2 {
		v, err := statField(filepath.Join(s.dirs[0], "cpu.stat"), "usage_usec")
		return time.Duration(v) * time.Microsecond, err
	}
	b, err := os.ReadFile(filepath.Join(s.dirs[1], "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err
}

// Throttled is how many periods the quota ran out in (cpu.stat's
// nr_throttled).
func (s *CPUShare) Throttled() (int64, error) {
	return statField(filepath.Join(s.dirs[0], "cpu.stat"), "nr_throttled")
}

func statField(file, key string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", file, key)
}

// Close removes the cgroup; its processes must have exited.
func (s *CPUShare) Close() error {
	var errs []error
	for _, dir := range s.dirs {
		if err := os.Remove(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
