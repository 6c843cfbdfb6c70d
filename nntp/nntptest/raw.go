package nntptest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/klauspost/compress/flate"
)

// RawOver is the anchor of the OVER benchmarks: the least a reader can do.
// It connects, optionally turns on COMPRESS DEFLATE, selects group, and for
// each chunk of first..last sends OVER and reads lines until the
// terminating dot, without parsing, unstuffing or checking them. It
// returns the number of lines read.
func RawOver(ctx context.Context, addr, group string, first, last, chunk int64, deflate bool) (int64, error) {
	nc, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if d, ok := ctx.Deadline(); ok {
		nc.SetDeadline(d)
	} else {
		nc.SetDeadline(time.Now().Add(10 * time.Minute))
	}
	raw := bufio.NewReaderSize(nc, 64<<10)
	var r *bufio.Reader = raw
	var w io.Writer = nc
	var fw *flate.Writer
	status := func(want string) error {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(line, []byte(want)) {
			return fmt.Errorf("raw: want %s, got %q", want, line)
		}
		return nil
	}
	send := func(cmd string) error {
		if _, err := io.WriteString(w, cmd+"\r\n"); err != nil {
			return err
		}
		if fw != nil {
			return fw.Flush()
		}
		return nil
	}
	if err := status("20"); err != nil {
		return 0, err
	}
	if err := send("MODE READER"); err != nil {
		return 0, err
	}
	if err := status("20"); err != nil {
		return 0, err
	}
	if deflate {
		if err := send("COMPRESS DEFLATE"); err != nil {
			return 0, err
		}
		if err := status("206"); err != nil {
			return 0, err
		}
		fw, _ = flate.NewWriter(nc, flate.BestSpeed)
		w = fw
		r = bufio.NewReaderSize(flate.NewReaderOpts(exactReader{raw}, flate.WithPartialBlock()), 64<<10)
	}
	if err := send("GROUP " + group); err != nil {
		return 0, err
	}
	if err := status("211"); err != nil {
		return 0, err
	}
	var lines int64
	for lo := first; lo <= last; lo += chunk {
		hi := min(lo+chunk-1, last)
		if err := send("OVER " + strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)); err != nil {
			return lines, err
		}
		if err := status("224"); err != nil {
			return lines, err
		}
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				if errors.Is(err, bufio.ErrBufferFull) {
					continue
				}
				return lines, err
			}
			if len(line) == 3 && line[0] == '.' {
				break
			}
			lines++
		}
	}
	return lines, nil
}

type exactReader struct{ br *bufio.Reader }

func (r exactReader) Read(p []byte) (int, error) { return r.br.Read(p) }
func (r exactReader) ReadByte() (byte, error)    { return r.br.ReadByte() }
