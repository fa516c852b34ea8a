package sys

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Machine describes the host, for the report.
type Machine struct {
	Cores  int
	CPU    string
	MemGiB float64
	Kernel string
	Go     string
}

// ReadMachine gathers the host facts.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil {
		m.MemGiB = float64(si.Totalram) * float64(si.Unit) / (1 << 30)
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		b := make([]byte, 0, len(u.Release))
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		m.Kernel = string(b)
	}
	return m
}

func (m Machine) String() string {
	return fmt.Sprintf("%d cores (%s), %.1f GiB RAM, Linux %s, %s", m.Cores, m.CPU, m.MemGiB, m.Kernel, m.Go)
}

// FS describes the filesystem holding a directory.
type FS struct {
	Path    string // the directory
	Mount   string // its mount point
	Device  string
	Type    string
	Options string
	Journal string // "journal", "no journal", or "?" when it cannot be told
}

func (f FS) String() string {
	return fmt.Sprintf("%s %s (%s) mounted on %s [%s]", f.Device, f.Type, f.Journal, f.Mount, f.Options)
}

// ReadFS finds the mount holding dir in /proc/mounts and, for ext4, whether
// it has a journal (/sys/fs/ext4/<dev>/journal_task is "<none>" without
// one; dumpe2fs -h as a fallback).
func ReadFS(dir string) FS {
	abs, _ := filepath.Abs(dir)
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	out := FS{Path: abs, Journal: "?"}
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return out
	}
	best := -1
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		mp := unescapeMount(f[1])
		if mp == "/" || abs == mp || strings.HasPrefix(abs, mp+"/") {
			if len(mp) > best {
				best = len(mp)
				out.Device, out.Mount, out.Type, out.Options = f[0], mp, f[2], f[3]
			}
		}
	}
	if out.Type == "ext4" || out.Type == "ext3" {
		dev := filepath.Base(out.Device)
		if jt, err := os.ReadFile(filepath.Join("/sys/fs/ext4", dev, "journal_task")); err == nil {
			if strings.TrimSpace(string(jt)) == "<none>" {
				out.Journal = "no journal"
			} else {
				out.Journal = "journal"
			}
		} else if o, err := exec.Command("dumpe2fs", "-h", out.Device).Output(); err == nil {
			if strings.Contains(string(o), "has_journal") {
				out.Journal = "journal"
			} else {
				out.Journal = "no journal"
			}
		}
		if out.Journal == "journal" && !strings.Contains(out.Options, "data=") {
			out.Journal = "journal, data=ordered"
		}
	}
	return out
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// LoadAvg is the 1-minute load average from /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
