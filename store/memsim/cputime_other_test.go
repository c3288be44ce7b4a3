//go:build !unix

package memsim_test

import "time"

func processCPU() time.Duration { return 0 }
