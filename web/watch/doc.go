// Package watch is the WebSocket gateway for persist watches: GET
// /ws/watch streams one persist.Stream.Watch to a browser as JSON text
// messages (docs/websocket.md), with the JS client (/ws/watch.js) and a
// live page (/watch) embedded, and the HTTP Basic authorization that maps
// a browser's login to the bus account's readable scopes. It mounts on a
// web.Server or any http.ServeMux.
package watch
