package webhooks

import "testing"

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "1", want: 1},
		{in: "12345", want: 12345},
		{in: "2m", want: 2 << 20},
		{in: "2M", want: 2 << 20},
		{in: "5k", want: 5 << 10},
		{in: "5KB", want: 5 << 10},
		{in: "5kib", want: 5 << 10},
		{in: "5Mb", want: 5 << 20},
		{in: "5mib", want: 5 << 20},
		{in: "1g", want: 1 << 30},
		{in: "1Gb", want: 1 << 30},
		{in: "1GiB", want: 1 << 30},
		{in: "007", want: 7},
		{in: "8589934591g", want: 8589934591 << 30}, // the largest whole number of GiB in an int64
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "", wantErr: true},
		{in: "invalid", wantErr: true},
		{in: "0", wantErr: true},
		{in: "0k", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "1.5m", wantErr: true},
		{in: "1 m", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "m", wantErr: true},
		{in: "1t", wantErr: true},
		{in: "1b", wantErr: true},
		{in: "1mm", wantErr: true},
		{in: "1e6", wantErr: true},
		{in: "8589934592g", wantErr: true},
		{in: "9223372036854775808", wantErr: true},
		{in: "١٢", wantErr: true}, // non-ASCII digits
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
