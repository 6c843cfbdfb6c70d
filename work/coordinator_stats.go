package work

import "github.com/switchyard-dev/switchyard/nntp"

// Pool is the coordinator's NNTP pool (for its stats; the coordinator owns
// it: do not stop or resize it).
func (c *Coordinator) Pool() *nntp.Pool { return c.pool }

// Leases is the main shard's lease handle, which settles and expires
// abandoned leases (for its stats); nil on the other shards.
func (c *Coordinator) Leases() *Leases { return c.leases }
