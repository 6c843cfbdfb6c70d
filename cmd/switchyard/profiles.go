package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// startProfiles starts the profiles whose file names are not empty and
// returns a func that stops them and writes them out.
func startProfiles(cpu, block, mutex string) (func() error, error) {
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		cpuFile = f
	}
	if block != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond)) // blocking events of 1µs or more
	}
	if mutex != "" {
		runtime.SetMutexProfileFraction(10)
	}
	return func() error {
		var first error
		keep := func(err error) {
			if first == nil {
				first = err
			}
		}
		if cpuFile != nil {
			pprof.StopCPUProfile()
			keep(cpuFile.Close())
		}
		for _, p := range []struct{ name, file string }{{"block", block}, {"mutex", mutex}} {
			if p.file == "" {
				continue
			}
			f, err := os.Create(p.file)
			if err != nil {
				keep(err)
				continue
			}
			keep(pprof.Lookup(p.name).WriteTo(f, 0))
			keep(f.Close())
		}
		return first
	}, nil
}
