//go:build !linux

package sysinfo

// Temperature has no source outside Linux; see thermal_linux.go.
func Temperature(string) (float64, bool) { return 0, false }
