//go:build !race

package integration

// raceEnabled is true under -race, where the stack runs several times slower:
// the transfer tests move less data then.
const raceEnabled = false
