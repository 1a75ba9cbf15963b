module github.com/squallhq/squall

go 1.26

require github.com/jmespath/go-jmespath v0.4.0 // indirect
