//go:build race

package timer

const raceEnabled = true
