package sys

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/farro-dev/farro/internal/testpg"
)

// PGBin returns the directory of PostgreSQL's server binaries (initdb,
// postgres), or "" if there is none: internal/testpg's, which starts the
// bench's instance.
func PGBin() string { return testpg.Bin() }

// EnsurePackages installs PostgreSQL and Redis from Debian's packages when
// they are missing (apt-get update once, then apt-get install). Services
// are not started by the packages here: the benchmark runs private
// instances.
func EnsurePackages(logf func(string, ...any)) error {
	var missing []string
	if PGBin() == "" {
		missing = append(missing, "postgresql")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing = append(missing, "redis-server")
	}
	if len(missing) == 0 {
		return nil
	}
	if err := AptInstall(logf, missing...); err != nil {
		return err
	}
	if PGBin() == "" {
		return fmt.Errorf("postgresql installed but no initdb found under /usr/lib/postgresql")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("redis-server installed but not in PATH")
	}
	return nil
}

// AptInstall installs Debian packages (as root: apt-get update, then
// apt-get install --no-install-recommends), with the tail of apt's
// output in the error.
func AptInstall(logf func(string, ...any), pkgs ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing %s and not root: install them (apt-get install %s)", strings.Join(pkgs, ", "), strings.Join(pkgs, " "))
	}
	logf("installing %s from Debian's packages", strings.Join(pkgs, ", "))
	if err := apt("update"); err != nil {
		return err
	}
	return AptInstallNoUpdate(pkgs...)
}

// AptInstallNoUpdate is AptInstall's install step alone (a retry under
// other package names).
func AptInstallNoUpdate(pkgs ...string) error {
	return apt(append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
}

func apt(args ...string) error {
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, tail(string(out), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// LoopExt4 makes a journaled ext4 filesystem in a sparse image file of the
// given size and mounts it on dir (loop device). Unmount undoes it and
// removes the image.
type LoopExt4 struct {
	Image, Dir string
}

// MountLoopExt4 creates the image, formats and mounts it.
func MountLoopExt4(image, dir string, sizeGiB int) (*LoopExt4, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := Run("truncate", "-s", fmt.Sprintf("%dG", sizeGiB), image); err != nil {
		return nil, err
	}
	if err := Run("mkfs.ext4", "-q", "-F", image); err != nil {
		os.Remove(image)
		return nil, err
	}
	if err := Run("mount", "-o", "loop", image, dir); err != nil {
		os.Remove(image)
		return nil, err
	}
	return &LoopExt4{Image: image, Dir: dir}, nil
}

// Unmount unmounts the filesystem and removes its image.
func (l *LoopExt4) Unmount() error {
	err := Run("umount", l.Dir)
	if err != nil {
		err = Run("umount", "-l", l.Dir)
	}
	os.Remove(l.Image)
	os.Remove(l.Dir)
	return err
}
