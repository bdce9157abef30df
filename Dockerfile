# Multi-stage: build a static binary, ship it alone on a minimal base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/jetfn ./cmd/jetfn

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/jetfn /usr/local/bin/jetfn
COPY manifests /etc/jetfn/manifests
ENV JETFN_MANIFEST=/etc/jetfn/manifests/production.yaml \
    METRICS_ADDR=:9090
EXPOSE 9090
USER nonroot:nonroot
ENTRYPOINT ["jetfn"]
CMD ["run"]
