package bench

import "testing"

func TestMsgSeq(t *testing.T) {
	for _, c := range []struct {
		in   string
		seq  uint64
		isOK bool
	}{
		{`{"type":"msg","seq":42,"key":"k","time":1,"value":"v"}`, 42, true},
		{`{"type":"msg","seq":18446744073709551615,"time":1,"value":""}`, 18446744073709551615, true},
		{`{"type":"ready","from":7}`, 0, false},
		{`{"type":"msg","seq":}`, 0, false},
		{`{"type":"caught-up"}`, 0, false},
	} {
		seq, ok := msgSeq([]byte(c.in))
		if seq != c.seq || ok != c.isOK {
			t.Errorf("msgSeq(%s) = %d, %v; want %d, %v", c.in, seq, ok, c.seq, c.isOK)
		}
	}
}
