package testpost

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Defaults of Shape.
const (
	// VolumesDefault is how many .partNN.rar volumes a release has.
	VolumesDefault = 3
	// VolumeSizeDefault is the size of every volume but the last (which is
	// shorter, as a real rar set's is). Small: tests post whole releases.
	VolumeSizeDefault = 200 << 10
	// par2BlockSize keeps par2 fast on small releases; a multiple of 4 as
	// par2 requires.
	par2BlockSize = 16 << 10
)

// Shape sizes a RandomRelease.
type Shape struct {
	// Volumes is the number of rar volumes. Zero means VolumesDefault.
	Volumes int
	// VolumeSize is the size of a full volume. Zero means VolumeSizeDefault.
	VolumeSize int
}

// Release is a set of files shaped like a real binary release.
type Release struct {
	Title string
	// Files: the .nfo, the .partNN.rar volumes, then the .par2 files.
	Files []File
	// RealPar2 says the .par2 files hold real PAR 2.0 recovery data made
	// by the par2 command; false means par2 was not installed and the
	// single .par2 file holds random bytes (named like one, nothing more).
	RealPar2 bool
}

// RandomRelease builds a release called title from seed: an .nfo, rar
// volumes of random bytes (not real rar archives: nobody unpacks them)
// and par2 files. The .nfo and volumes depend only on seed and shape.
// The par2 files are real recovery data (5% redundancy) when the par2
// command is installed (Debian package par2), else random bytes.
func RandomRelease(ctx context.Context, seed uint64, title string, shape Shape) (Release, error) {
	if shape.Volumes <= 0 {
		shape.Volumes = VolumesDefault
	}
	if shape.VolumeSize <= 0 {
		shape.VolumeSize = VolumeSizeDefault
	}
	if title == "" || strings.ContainsAny(title, "/\\\r\n\x00") {
		return Release{}, fmt.Errorf("testpost: bad release title %q", title)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5377697463687961))
	rel := Release{Title: title}
	nfo := fmt.Sprintf("%s\r\n\r\nSource: switchyard test release\r\nVolumes: %d\r\nSeed: %d\r\n", title, shape.Volumes, seed)
	rel.Files = append(rel.Files, File{Name: title + ".nfo", Data: []byte(nfo)})
	var volumes []File
	for i := 1; i <= shape.Volumes; i++ {
		size := shape.VolumeSize
		if i == shape.Volumes && shape.Volumes > 1 {
			size = shape.VolumeSize/2 + rng.IntN(shape.VolumeSize/2+1)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		volumes = append(volumes, File{Name: fmt.Sprintf("%s.part%02d.rar", title, i), Data: data})
	}
	rel.Files = append(rel.Files, volumes...)

	par2, real, err := makePar2(ctx, title, volumes, rng)
	if err != nil {
		return Release{}, err
	}
	rel.Files = append(rel.Files, par2...)
	rel.RealPar2 = real
	return rel, nil
}

// makePar2 creates recovery files for volumes with the par2 command, or
// one fake .par2 when the command is missing.
func makePar2(ctx context.Context, title string, volumes []File, rng *rand.Rand) ([]File, bool, error) {
	bin, err := exec.LookPath("par2")
	if err != nil {
		fake := make([]byte, 4096)
		for i := range fake {
			fake[i] = byte(rng.Uint32())
		}
		return []File{{Name: title + ".par2", Data: fake}}, false, nil
	}
	dir, err := os.MkdirTemp("", "testpost-par2-")
	if err != nil {
		return nil, false, fmt.Errorf("testpost: par2: %w", err)
	}
	defer os.RemoveAll(dir)
	args := []string{"create", "-q", "-q", fmt.Sprintf("-s%d", par2BlockSize), "-r5", "-n1", title + ".par2"}
	for _, v := range volumes {
		if err := os.WriteFile(filepath.Join(dir, v.Name), v.Data, 0o644); err != nil {
			return nil, false, fmt.Errorf("testpost: par2: %w", err)
		}
		args = append(args, v.Name)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, false, fmt.Errorf("testpost: par2 create: %w: %s", err, out)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.par2"))
	if err != nil || len(names) == 0 {
		return nil, false, errors.New("testpost: par2 create made no .par2 files")
	}
	// The index file first, then the volumes, as posters order them.
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(strings.TrimSuffix(a, ".par2"), strings.TrimSuffix(b, ".par2"))
	})
	var out []File
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, false, fmt.Errorf("testpost: par2: %w", err)
		}
		out = append(out, File{Name: filepath.Base(n), Data: data})
	}
	return out, true, nil
}
