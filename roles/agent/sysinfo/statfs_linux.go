package sysinfo

import "syscall"

// statfs counts in Frsize units: Linux reports the block counts in the
// fragment size, which differs from Bsize on some filesystems; a zero Frsize
// (very old kernels) means Bsize.
func statfs(dir string) (fsStat, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fsStat{}, err
	}
	bsize := uint64(st.Frsize)
	if bsize == 0 {
		bsize = uint64(st.Bsize)
	}
	return fsStat{blockSize: bsize, blocks: uint64(st.Blocks), free: uint64(st.Bfree), avail: uint64(st.Bavail)}, nil
}
