//go:build race

package scale

// raceEnabled: under -race the embedded FerretDB in this test process runs
// several times slower, so the normal suite's batch is smaller.
const raceEnabled = true
