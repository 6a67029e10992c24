module sluice.dev/bench/origin-go

go 1.21
