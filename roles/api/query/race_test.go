//go:build race

package query

// raceEnabled trims the randomised integration runs: modernc's SQLite is
// translated C and runs many times slower under the race detector.
const raceEnabled = true
