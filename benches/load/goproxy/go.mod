module goproxy

go 1.19
