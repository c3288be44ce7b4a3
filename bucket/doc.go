// Package bucket is the pure token-bucket arithmetic of the limiter and the
// codec of its composite bucket items. It performs no I/O and keeps no
// clock: every function takes the times it needs.
//
// # Units
//
// Token amounts are int64 millitokens ([MilliPerToken] = 1000 per token), so
// a fractional rate such as 100 tokens per minute (1.666… tokens per second)
// is computed with integer arithmetic only, rounding down to whole
// millitokens. Times are int64 Unix milliseconds and periods are
// milliseconds.
//
// # Lazy refill and the shared rf
//
// A bucket item holds several limits (say rpm and tpm) and one refill
// timestamp rf shared by all of them. The stored balance Tokens of each limit
// excludes the refill since rf; readers compute it on the fly:
//
//	effective = min(Tokens + floor(max(0, now-rf) * RefillAmount / RefillPeriod), Burst)
//
// see [State.Effective]. Writers that merely consume add a negative amount to
// Tokens and leave rf alone; a writer that claims the refill adds
// [State.RefillDelta] (minus what it consumes) and moves rf forward, under a
// condition on the rf it read, so that the same window is never credited
// twice. Refilling an interval in several steps never credits more than
// refilling it in one (each split point may lose up to one millitoken to
// rounding down). [State.RetryAfter] inverts the formula: the earliest time
// at which a given amount is available.
//
// # Bounds
//
// Limit fields are bounded ([MaxTokens], [MaxRefillPeriod], see
// [Limit.Validate]); balances and timestamps are not, because debt from
// charges after the fact, skewed clocks and buckets idle for years are all
// legitimate. Within the bounds no computation here overflows: products of
// time and rate use 128-bit intermediates, differences that can leave the
// int64 range are taken unsigned, and the few results that cannot be
// represented saturate in the documented, conservative direction.
//
// # Composite items
//
// An item stores each limit as six number attributes named
// b_{limit}_{field} ([AttrName]), with field tk (Tokens), cp (Capacity), bx
// (Burst), ra (RefillAmount), rp (RefillPeriod) and tc (TotalConsumed), plus
// the shared [AttrRefill] "rf". Names are parsed from the right, so limit
// names may contain underscores ([ParseAttrName]). [Decode] turns the
// attributes into a [Composite] whose limits are sorted by name, and
// [Composite.Attrs] emits them back in a deterministic order.
//
// # Calendar quotas
//
// A quota is N per calendar window, reset at each boundary, with no refill
// in between. A [Calendar] says where the boundaries are (a day, a week
// from a start day, a month from an anchor day, in a time zone);
// [Calendar.Bounds] returns the window that holds an instant, following
// the zone's clock changes and short months with the standard library's
// calendar (time.Date). A quota's attributes are q_{limit}_{field}
// ([QuotaAttrName]); [Decode] leaves them out of a Composite.
package bucket
