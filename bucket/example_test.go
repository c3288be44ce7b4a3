package bucket_test

import (
	"fmt"
	"maps"

	"github.com/shardlimit/limiter/bucket"
)

// The concurrency trace of the composite-item design: 100 tokens per minute,
// 90 tokens stored, two writers arrive one second after rf.
func Example() {
	rpm := bucket.Limit{
		Capacity:     100 * bucket.MilliPerToken,
		Burst:        100 * bucket.MilliPerToken,
		RefillAmount: 100 * bucket.MilliPerToken,
		RefillPeriod: 60_000, // ms
	}
	s := bucket.State{Limit: rpm, Tokens: 90_000}
	rf := int64(1_706_000_000_000) // Unix ms
	now := rf + 1000

	// Lazy refill: floor(1000 * 100000 / 60000) = 1666 millitokens.
	fmt.Println("effective:", s.Effective(rf, now))

	// Writer A claims the refill (ADD delta-3000, SET rf = now) ...
	fmt.Println("delta:", s.RefillDelta(rf, now))
	s = s.Refilled(rf, now).Charge(3000)
	rf = now
	// ... writer B lost the rf race and only consumes.
	s = s.Charge(7000)
	fmt.Println("tokens:", s.Tokens, "consumed:", s.TotalConsumed)

	// How long until 90 tokens are available again?
	wait, ok := s.RetryAfter(rf, now, 90_000)
	fmt.Println("retry after:", wait, "ms", ok)
	// Output:
	// effective: 91666
	// delta: 1666
	// tokens: 81666 consumed: 10000
	// retry after: 5001 ms true
}

func ExampleDecode() {
	item := map[string]int64{ // the numeric attributes of a bucket item
		"rf":       1_706_000_000_000,
		"ttl":      1_704_067_200,
		"b_rpm_tk": 99_000, "b_rpm_cp": 100_000, "b_rpm_bx": 100_000,
		"b_rpm_ra": 100_000, "b_rpm_rp": 60_000, "b_rpm_tc": 1000,
		"b_gpt_4_tk": 5000, "b_gpt_4_cp": 10_000, "b_gpt_4_bx": 10_000,
		"b_gpt_4_ra": 10_000, "b_gpt_4_rp": 1000, "b_gpt_4_tc": 0,
	}
	c, err := bucket.Decode(maps.All(item))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range c.Limits {
		fmt.Println(l.Name, l.Effective(c.Refill, c.Refill+500))
	}

	delete(item, "b_rpm_bx")
	_, err = bucket.Decode(maps.All(item))
	fmt.Println(err)
	// Output:
	// gpt_4 10000
	// rpm 99833
	// bucket: limit "rpm": missing attribute b_rpm_bx
}

func ExampleComposite_Attrs() {
	var c bucket.Composite
	c.Refill = 1_706_000_000_000
	c.Set("rpm", bucket.State{
		Limit:  bucket.Limit{Capacity: 100_000, Burst: 100_000, RefillAmount: 100_000, RefillPeriod: 60_000},
		Tokens: 100_000,
	})
	for name, v := range c.Attrs() {
		fmt.Println(name, v)
	}
	// Output:
	// rf 1706000000000
	// b_rpm_tk 100000
	// b_rpm_cp 100000
	// b_rpm_bx 100000
	// b_rpm_ra 100000
	// b_rpm_rp 60000
	// b_rpm_tc 0
}

func ExampleLimit_PerShard() {
	rpm := bucket.Limit{Capacity: 100_000, Burst: 100_000, RefillAmount: 100_000, RefillPeriod: 60_000}
	fmt.Printf("%+v\n", rpm.PerShard(3))
	// Output:
	// {Capacity:33333 Burst:33333 RefillAmount:33333 RefillPeriod:60000}
}
