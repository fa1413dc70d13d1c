module example.invalid/callpost/go

go 1.19
