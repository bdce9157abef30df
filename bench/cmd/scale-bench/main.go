// Command scale-bench measures how jetfn's cost grows as a deployment
// grows (issue 34), beside nats.go written by hand. So far one curve:
// functions per process, idle.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/jetfn/jetfn/bench"
)

func main() {
	bench.RunIfChild()
	counts := flag.String("functions", "1,10,100,500", "numbers of functions per process, comma-separated")
	idle := flag.Duration("idle", 30*time.Second, "how long each process idles while the server counts its requests")
	profile := flag.String("profile", "", "write each process's CPU and allocation profiles of its idle window to this directory")
	flag.Parse()
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "scale-bench: -functions: %q is not a positive whole number\n", f)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := bench.RunIdle(ctx, ns, *idle, *profile, func(line string) { fmt.Println(line) }); err != nil {
		fmt.Fprintln(os.Stderr, "scale-bench:", err)
		os.Exit(1)
	}
}
