package usenet

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/testpersist/persistenv"
	"github.com/switchyard-dev/switchyard/persist"
)

// TestPublishingMergeRepublishesAfterLostWrite: an attempt that publishes a
// post and then loses its write to another writer (here: the record
// rewritten between mergeLoop's read and write), followed by an attempt
// that writes without publishing, leaves the stored record's post as the
// releases stream's latest row, not the lost attempt's. CI caught the
// race this pins (TestApplyIndependentOfWorkers: a published repost_of
// that the stored record did not hold).
func TestPublishingMergeRepublishesAfterLostWrite(t *testing.T) {
	t.Parallel()
	env := persistenv.Start(t, 1)
	ctx := context.Background()
	st, err := NewStore(env.Client(), "usenet-lostwrite")
	if err != nil {
		t.Fatal(err)
	}
	st.SetPolicy(testPolicy)
	// One post (and any reposts of it), applied in one pass: stored and
	// published.
	posts := genPosts(rand.New(rand.NewPCG(7, 11)), 1, []string{"alt.binaries.a"})
	b := NewBatch()
	for _, as := range articles(posts) {
		for _, a := range as {
			b.Add(a)
		}
	}
	if _, err := st.Apply(ctx, b.Binaries(), time.Now()); err != nil {
		t.Fatal(err)
	}
	published := publishedReleases(t, st)
	if len(published) == 0 {
		t.Fatal("nothing published")
	}
	var stored Release
	for _, r := range published {
		if stored.ID == "" || r.ID < stored.ID {
			stored = r
		}
	}
	coll, err := st.CollectionOfRelease(ctx, stored)
	if err != nil {
		t.Fatal(err)
	}

	attempts := 0
	_, ch, err := st.publishingMerge(ctx, coll, func(cur *Collection) (bool, []Release, error) {
		attempts++
		if attempts > 1 {
			return true, nil, nil // writes, publishes nothing
		}
		// Another writer's record comes first...
		m, err := st.collections.Get(ctx, coll)
		if err != nil {
			return false, nil, err
		}
		if _, err := st.collections.Set(ctx, coll, m.Value, persist.SetOptions{Headers: m.Headers}); err != nil {
			return false, nil, err
		}
		// ...after this attempt published a post it does not hold.
		lost := stored
		lost.Name = "a post the stored record does not hold"
		return true, []Release{lost}, nil
	})
	if err != nil || !ch || attempts != 2 {
		t.Fatalf("publishingMerge: changed %v after %d attempts, err %v; want a change after 2", ch, attempts, err)
	}
	got := publishedReleases(t, st)[stored.ID]
	if got.Name != stored.Name || got.Version != stored.Version {
		t.Fatalf("the stream's latest row of %s is %q version %d, want the stored %q version %d", stored.ID, got.Name, got.Version, stored.Name, stored.Version)
	}
}
