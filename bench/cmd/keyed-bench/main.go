// Command keyed-bench compares draining a backlog spread over many keys
// unordered, ordered per key by jetfn, by nats.go consumers one per
// partition (of a copy, or of the input partitioned as stored), and the
// ceiling of any design that copies, and prints each variant's median rate, CPU per message and
// its ratio to the unordered function (go tool task bench-keyed).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jetfn/jetfn/bench/keyed"
)

func main() {
	cfg := keyed.Config{Messages: 50_000, Keys: 1000, Concurrency: 64, Repetitions: 3,
		Variants: []string{keyed.Unordered, keyed.Ordered, keyed.Routed, keyed.Partitioned, keyed.IngestPartitioned, keyed.CopyCeiling, keyed.IngestCeiling}}
	flag.IntVar(&cfg.Messages, "messages", cfg.Messages, "backlog of each drain, 128 B messages")
	flag.IntVar(&cfg.Keys, "keys", cfg.Keys, "distinct keys the backlog is spread over")
	flag.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "workers, and the partitioned variants' partitions unless -partitions is set")
	flag.IntVar(&cfg.Partitions, "partitions", 0, "partitions of the partitioned variants (0: as many as -concurrency)")
	flag.IntVar(&cfg.Repetitions, "reps", cfg.Repetitions, "repetitions of each variant, alternated")
	variants := flag.String("variants", strings.Join(cfg.Variants, ","), "variants to run")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (server included) to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cfg.Variants = strings.Split(*variants, ",")
	cfg.Progress = func(s string) { fmt.Fprintln(os.Stderr, s) }
	samples, err := keyed.Run(context.Background(), cfg)
	if err != nil {
		log.Print(err)
		return
	}
	fmt.Printf("%d messages over %d keys, concurrency %d, %d partitions, %d repetitions alternated\n\n", cfg.Messages, cfg.Keys, cfg.Concurrency, cfg.PartitionCount(), cfg.Repetitions)
	fmt.Printf("%-26s %12s %10s %14s %12s\n", "variant", "msgs/s", "spread", "µs CPU/msg", "vs unordered")
	base := median(samples, keyed.Unordered, cfg.Messages)
	for _, v := range cfg.Variants {
		rate := median(samples, v, cfg.Messages)
		lo, hi := spread(samples, v, cfg.Messages)
		cpu := medianCPU(samples, v)
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.2f×", rate/base)
		}
		fmt.Printf("%-26s %12.0f %4.0f-%-5.0f %14.1f %12s\n", v, rate, lo, hi, float64(cpu)/1e3, ratio)
	}
}

func rates(samples []keyed.Sample, v string, n int) []float64 {
	var out []float64
	for _, s := range samples {
		if s.Variant == v {
			out = append(out, s.Rate(n))
		}
	}
	slices.Sort(out)
	return out
}

func median(samples []keyed.Sample, v string, n int) float64 {
	r := rates(samples, v, n)
	if len(r) == 0 {
		return 0
	}
	return r[len(r)/2]
}

func spread(samples []keyed.Sample, v string, n int) (float64, float64) {
	r := rates(samples, v, n)
	if len(r) == 0 {
		return 0, 0
	}
	return r[0], r[len(r)-1]
}

func medianCPU(samples []keyed.Sample, v string) time.Duration {
	var c []time.Duration
	for _, s := range samples {
		if s.Variant == v {
			c = append(c, s.CPUPerMsg)
		}
	}
	slices.Sort(c)
	if len(c) == 0 {
		return 0
	}
	return c[len(c)/2]
}
