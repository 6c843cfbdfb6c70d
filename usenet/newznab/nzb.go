package newznab

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-dev/switchyard/usenet"
)

// ErrNoSuchFile is the error of NZB for a release that is stored but one
// of whose binaries is not (it also wraps usenet.ErrNotFound).
var ErrNoSuchFile = errors.New("a file of the release is missing")

// NZBFile is the NZB of one release, as t=get answers it.
type NZBFile struct {
	Release usenet.Release
	Body    []byte
}

// NZB reads release id and its binaries from st and writes its NZB: what
// t=get answers, for any other handler that hands out NZBs (the releases
// page). A release that is not stored is an error wrapping
// usenet.ErrNotFound; one with a binary missing also wraps ErrNoSuchFile.
func NZB(ctx context.Context, st Store, id string) (NZBFile, error) {
	r, err := st.Release(ctx, id)
	if err != nil {
		return NZBFile{}, err
	}
	ids := make([]string, 0, len(r.Binaries))
	for _, b := range r.Binaries {
		ids = append(ids, b.ID)
	}
	bins, err := st.Binaries(ctx, ids)
	if errors.Is(err, usenet.ErrNotFound) {
		return NZBFile{}, fmt.Errorf("nzb %s: %w: %w", id, ErrNoSuchFile, err)
	}
	if err != nil {
		return NZBFile{}, fmt.Errorf("nzb %s: %w", id, err)
	}
	var buf bytes.Buffer
	if err := usenet.WriteNZB(&buf, r, usenet.PostBinaries(r, bins)); err != nil {
		return NZBFile{}, fmt.Errorf("nzb %s: %w", id, err)
	}
	return NZBFile{Release: r, Body: buf.Bytes()}, nil
}

// Header is the NZB's response headers but its Content-Type
// (usenet.NZBContentType): Content-Disposition with its file name, and
// the X-DNZB headers SABnzbd and NZBGet name and file the job by, with
// details the URL that stands for more information and for where to
// report a failure ("" leaves those three out).
func (f NZBFile) Header(details string) map[string]string {
	r := f.Release
	h := map[string]string{
		"Content-Disposition": contentDisposition(usenet.NZBFileName(r), r.Name),
		"X-DNZB-Name":         headerValue(r.Name),
		"X-DNZB-Category":     headerValue(usenet.CategoryName(r.Category)),
	}
	if details != "" {
		for _, k := range []string{"X-DNZB-MoreInfo", "X-DNZB-Details", "X-DNZB-Failure"} {
			h[k] = headerValue(details)
		}
	}
	return h
}
