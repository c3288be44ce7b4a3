package main

import (
	"strings"
	"sync"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// hotPartition is the table partition that took the most write units in
// any one second of the run (memsim only).
type hotPartition struct {
	PK string `json:"pk"`
	// PeakWCUPerSecond is the most write units it took in a window of one
	// second (sampled every 100 ms).
	PeakWCUPerSecond float64 `json:"peak_wcu_per_second"`
	// LaterPeakWCUPerSecond is the most write units any partition took in
	// a window of one second that starts a second or more into the run:
	// what a bucket's doublings leave once its first second is over.
	LaterPeakWCUPerSecond float64 `json:"later_peak_wcu_per_second"`
	// WCU and Throttles are its totals over the run.
	WCU       float64 `json:"wcu"`
	Throttles uint64  `json:"throttles"`
}

// sampleEvery and sampleWindow: the sliding window of the peak.
const (
	sampleEvery  = 100 * time.Millisecond
	sampleWindow = 10 // samples: one second
)

// sampler watches memsim's table partitions whose key starts with prefix
// and records the peak write rate of each over a sliding second.
type sampler struct {
	st     *memsim.Store
	prefix string
	skip   func(pk string) bool

	mu      sync.Mutex
	ring    [sampleWindow + 1]snapshot
	n       int // samples taken
	peak    map[string]float64
	later   map[string]float64 // peaks of the windows a second or more in
	start   time.Time
	initial map[string]memsim.PartitionStats

	stop chan struct{}
	done chan struct{}
}

type snapshot struct {
	at  time.Time
	wcu map[string]float64
}

func newSampler(st *memsim.Store, prefix string, skip func(string) bool) *sampler {
	s := &sampler{st: st, prefix: prefix, skip: skip, peak: map[string]float64{}, later: map[string]float64{},
		start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), initial: map[string]memsim.PartitionStats{}}
	for _, p := range s.partitions() {
		s.initial[p.PK] = p
	}
	s.sample()
	go s.loop()
	return s
}

func (s *sampler) partitions() []memsim.PartitionStats {
	var out []memsim.PartitionStats
	for _, p := range s.st.Partitions() {
		if p.Index == "" && strings.HasPrefix(p.PK, s.prefix) && !s.skip(p.PK) {
			out = append(out, p)
		}
	}
	return out
}

func (s *sampler) loop() {
	defer close(s.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			s.sample()
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *sampler) sample() {
	snap := snapshot{at: time.Now(), wcu: map[string]float64{}}
	for _, p := range s.partitions() {
		snap.wcu[p.PK] = p.Consumed.WriteUnits
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring[s.n%len(s.ring)] = snap
	s.n++
	if s.n < len(s.ring) {
		return // less than a second so far
	}
	oldest := s.ring[s.n%len(s.ring)] // a second ago
	dt := snap.at.Sub(oldest.at).Seconds()
	for pk, w := range snap.wcu {
		r := (w - oldest.wcu[pk]) / dt
		s.peak[pk] = max(s.peak[pk], r)
		if oldest.at.Sub(s.start) >= time.Second {
			s.later[pk] = max(s.later[pk], r)
		}
	}
}

// finish stops sampling and returns the hottest partition, or nil when no
// partition was written. A run shorter than a second has no peak of its
// own: its average rate stands in.
func (s *sampler) finish() *hotPartition {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	var hot *hotPartition
	elapsed := s.ring[(s.n-1)%len(s.ring)].at.Sub(s.ring[0].at).Seconds()
	for _, p := range s.partitions() {
		peak := s.peak[p.PK]
		if s.n < len(s.ring) && elapsed > 0 {
			peak = (p.Consumed.WriteUnits - s.initial[p.PK].Consumed.WriteUnits) / elapsed
		}
		if hot == nil || peak > hot.PeakWCUPerSecond {
			in := s.initial[p.PK]
			hot = &hotPartition{PK: p.PK, PeakWCUPerSecond: peak,
				WCU: p.Consumed.WriteUnits - in.Consumed.WriteUnits, Throttles: p.Throttles - in.Throttles}
		}
	}
	for _, r := range s.later {
		if hot != nil {
			hot.LaterPeakWCUPerSecond = max(hot.LaterPeakWCUPerSecond, r)
		}
	}
	return hot
}
