package main

import "github.com/shardlimit/limiter"

// localRefusals is the limiter option behind -local-refusals (nil: the
// limiter's default).
func localRefusals(on bool) limiter.Option {
	if on {
		return nil
	}
	return limiter.WithLocalRefusals(false)
}
