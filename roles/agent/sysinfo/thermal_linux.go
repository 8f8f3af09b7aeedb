//go:build linux

package sysinfo

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Temperature returns the highest temperature, in °C, of the thermal
// zones under sysRoot ("/sys" normally): the hottest zone is the one
// that throttles the device. ok is false when no zone gives a reading
// (a VM or a container often has none), so the caller omits the figure
// rather than report 0 °C.
func Temperature(sysRoot string) (celsius float64, ok bool) {
	zones, _ := filepath.Glob(filepath.Join(sysRoot, "class", "thermal", "thermal_zone*", "temp"))
	for _, z := range zones {
		raw, err := os.ReadFile(z)
		if err != nil {
			continue // a zone whose sensor is asleep answers EAGAIN
		}
		milli, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		// Below -273 °C or above 200 °C is a sensor error, not a reading.
		if err != nil || milli < -273000 || milli > 200000 {
			continue
		}
		if c := float64(milli) / 1000; !ok || c > celsius {
			celsius, ok = c, true
		}
	}
	return celsius, ok
}
