//go:build !linux

package sysinfo

import "golang.org/x/sys/unix"

// statfs counts in Bsize units: the BSDs and macOS have no Frsize, and
// their f_bsize is already the unit of the block counts.
func statfs(dir string) (fsStat, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fsStat{}, err
	}
	bsize := uint64(st.Bsize)
	return fsStat{blockSize: bsize, blocks: uint64(st.Blocks), free: uint64(st.Bfree), avail: uint64(st.Bavail)}, nil
}
