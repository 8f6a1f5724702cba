// The native gRPC sidecar: triton_kit/loadtest/sidecar/server.py's job in C++, on gRPC's generic API.
//
// Why: the Python sidecar spends about 0.16 ms of CPU per call in grpc.aio's Python layer,
// CPU taken from the Triton server that shares the machine (benchmarks/results/loadgen.md). Here
// each call is raw bytes through grpc::GenericStub: no protobuf code, no interpreter.
//
// It speaks triton_kit/loadtest/sidecar/wire.py's frames over the socket inherited as --fd:
//   request <IBdII: call id, method index, deadline s (< 0: none), metadata len, payload len,
//           then the metadata (JSON list of [key, value]) and the serialized protobuf;
//   reply   <IBI:   call id, status (0 OK, 1 RPC_ERROR), body len, then the body
//           (RPC_ERROR: JSON {"code": "StatusCode.<NAME>", "details", "debug"}).
// One thread reads frames and starts calls; one drains the completion queue and writes
// the replies, every reply ready at once in one write. It ends on the socket's EOF (the
// Locust process closed it or died): calls still in flight are cancelled, then it exits 0.
//
// TLS stays with the Python sidecar (triton_kit/loadtest/sidecar/client.py picks it for grpcs://).

#include <grpcpp/grpcpp.h>
#include <grpcpp/generic/generic_stub.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the frames are little-endian");

namespace {

constexpr size_t kRequestHeader = 4 + 1 + 8 + 4 + 4;  // <IBdII, packed
constexpr size_t kReplyHeader = 4 + 1 + 4;            // <IBI, packed
constexpr uint8_t kOk = 0, kRpcError = 1;
constexpr double kLongestDeadline = 1e9;  // seconds; about 30 years
const char* const kMethods[] = {
    "/inference.GRPCInferenceService/ModelInfer",
    "/inference.GRPCInferenceService/ServerReady",
    "/inference.GRPCInferenceService/ModelReady",
    "/inference.GRPCInferenceService/ModelMetadata",
};
constexpr size_t kMethodCount = sizeof(kMethods) / sizeof(kMethods[0]);

// Python's str(grpc.StatusCode.X), indexed by the numeric code (0..16).
const char* const kCodeNames[] = {
    "OK",        "CANCELLED",         "UNKNOWN",           "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",       "DATA_LOSS",
    "UNAUTHENTICATED",
};

std::string CodeName(int code) {
    const int count = static_cast<int>(sizeof(kCodeNames) / sizeof(kCodeNames[0]));
    return std::string("StatusCode.") + (code >= 0 && code < count ? kCodeNames[code] : "UNKNOWN");
}

template <typename T>
T Load(const char* at) {
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
}

// One call in flight: owned by the reader until started, then by the completion thread.
struct Call {
    uint32_t id = 0;
    grpc::ClientContext context;
    grpc::ByteBuffer reply;
    grpc::Status status;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
};

struct Options {
    int fd = -1;
    std::string address;
};

class Sidecar {
  public:
    Sidecar(int fd, std::shared_ptr<grpc::Channel> channel)
        : fd_(fd), stub_(std::move(channel)) {}

    // Reads frames until EOF, then cancels what is left and waits for the replies thread.
    int Run() {
        std::thread completions([this] { DrainCompletions(); });
        const int code = ReadFrames();
        {
            std::lock_guard<std::mutex> lock(calls_mutex_);
            for (Call* call : in_flight_) call->context.TryCancel();
        }
        queue_.Shutdown();  // Next() still hands out every pending call, then returns false
        completions.join();
        return code;
    }

  private:
    int ReadFrames() {
        std::vector<char> buffer;
        size_t start = 0;
        char chunk[1 << 16];
        for (;;) {
            const ssize_t got = read(fd_, chunk, sizeof(chunk));
            // EOF or a reset: the Locust process closed its end, or died (unread replies
            // turn its close into a reset), as the Python sidecar's connection_lost.
            if (got == 0 || (got < 0 && errno == ECONNRESET)) return 0;
            if (got < 0) {
                if (errno == EINTR) continue;
                std::perror("triton-kit-grpc-sidecar: read");
                return 1;
            }
            buffer.insert(buffer.end(), chunk, chunk + got);
            start = ParseFrames(buffer, start);
            if (start > (1u << 20) || start == buffer.size()) {  // drop what was consumed
                buffer.erase(buffer.begin(), buffer.begin() + static_cast<long>(start));
                start = 0;
            }
        }
    }

    // Starts a call for every whole frame from `start`; returns where the rest begins.
    size_t ParseFrames(const std::vector<char>& buffer, size_t start) {
        while (buffer.size() - start >= kRequestHeader) {
            const char* header = buffer.data() + start;
            const uint32_t meta_len = Load<uint32_t>(header + 13);
            const uint32_t payload_len = Load<uint32_t>(header + 17);
            const size_t end = start + kRequestHeader + meta_len + payload_len;
            if (buffer.size() < end) break;
            const char* meta = header + kRequestHeader;
            Start(Load<uint32_t>(header), static_cast<uint8_t>(header[4]), Load<double>(header + 5),
                  std::string(meta, meta_len), meta + meta_len, payload_len);
            start = end;
        }
        return start;
    }

    void Start(uint32_t id, uint8_t method, double deadline, const std::string& meta,
               const char* payload, size_t length) {
        auto call = std::make_unique<Call>();
        call->id = id;
        if (method >= kMethodCount) {
            Fail(id, grpc::StatusCode::UNKNOWN, "no gRPC method of index " + std::to_string(method));
            return;
        }
        std::string problem;
        if (!ApplyMetadata(meta, &call->context, &problem)) {
            Fail(id, grpc::StatusCode::INTERNAL, problem);
            return;
        }
        if (deadline >= 0 && deadline < kLongestDeadline) {  // beyond: none (no overflow)
            call->context.set_deadline(std::chrono::system_clock::now() +
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::duration<double>(deadline)));
        }
        grpc::Slice slice(payload, length);
        grpc::ByteBuffer request(&slice, 1);
        Call* raw = call.release();
        {
            std::lock_guard<std::mutex> lock(calls_mutex_);
            in_flight_.insert(raw);
        }
        raw->reader = stub_.PrepareUnaryCall(&raw->context, kMethods[method], request, &queue_);
        raw->reader->StartCall();
        raw->reader->Finish(&raw->reply, &raw->status, raw);
    }

    static bool ApplyMetadata(const std::string& meta, grpc::ClientContext* context,
                              std::string* problem) {
        if (meta.empty()) return true;
        const auto pairs = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
        if (!IsPairList(pairs)) {
            *problem = "metadata is not a JSON list of [key, value] strings";
            return false;
        }
        for (const auto& pair : pairs) {
            const auto key = pair[0].get<std::string>();
            if (!LegalHeaderKey(key)) {
                *problem = "metadata key " + key + " is not a legal gRPC header name";
                return false;
            }
            context->AddMetadata(key, pair[1].get<std::string>());
        }
        return true;
    }

    static bool IsPairList(const nlohmann::json& value) {
        if (!value.is_array()) return false;
        for (const auto& pair : value) {
            if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() ||
                !pair[1].is_string()) {
                return false;
            }
        }
        return true;
    }

    // gRPC's rule for header names (lower case, digits, '-', '_', '.'); AddMetadata would
    // otherwise abort the whole process on a bad one.
    static bool LegalHeaderKey(const std::string& key) {
        if (key.empty()) return false;
        for (const char c : key) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                            c == '_' || c == '.';
            if (!ok) return false;
        }
        return true;
    }

    // A call that never reached gRPC still gets its reply, so no caller waits in vain.
    void Fail(uint32_t id, grpc::StatusCode code, const std::string& details) {
        std::string frame;
        AppendError(&frame, id, static_cast<int>(code), details);
        Write(frame);
    }

    void DrainCompletions() {
        std::string out;
        void* tag = nullptr;
        bool ok = false;
        while (queue_.Next(&tag, &ok)) {
            Complete(static_cast<Call*>(tag), &out);
            // Replies that are already done leave with this one, in one write.
            while (queue_.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)) ==
                   grpc::CompletionQueue::GOT_EVENT) {
                Complete(static_cast<Call*>(tag), &out);
            }
            Write(out);
            out.clear();
        }
    }

    void Complete(Call* call, std::string* out) {
        {
            std::lock_guard<std::mutex> lock(calls_mutex_);
            in_flight_.erase(call);
        }
        if (call->status.ok()) {
            AppendOk(out, call->id, call->reply);
        } else {
            AppendError(out, call->id, static_cast<int>(call->status.error_code()),
                        call->status.error_message());
        }
        delete call;
    }

    static void AppendHeader(std::string* out, uint32_t id, uint8_t status, uint32_t length) {
        char header[kReplyHeader];
        std::memcpy(header, &id, 4);
        header[4] = static_cast<char>(status);
        std::memcpy(header + 5, &length, 4);
        out->append(header, kReplyHeader);
    }

    static void AppendOk(std::string* out, uint32_t id, const grpc::ByteBuffer& reply) {
        std::vector<grpc::Slice> slices;
        if (!reply.Dump(&slices).ok()) {
            AppendError(out, id, static_cast<int>(grpc::StatusCode::INTERNAL),
                        "the reply could not be read");
            return;
        }
        AppendHeader(out, id, kOk, static_cast<uint32_t>(reply.Length()));
        for (const auto& slice : slices) {
            out->append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        }
    }

    // debug stays empty: gRPC C++ has no debug_error_string, and the SDK reads only the
    // code and details (tritonclient's get_error_grpc).
    static void AppendError(std::string* out, uint32_t id, int code, const std::string& details) {
        // A server message that is not UTF-8 is replaced, not thrown on: Python's json.loads
        // reads the body.
        const std::string body =
            nlohmann::json{{"code", CodeName(code)}, {"details", details}, {"debug", ""}}.dump(
                -1, ' ', false, nlohmann::json::error_handler_t::replace);
        AppendHeader(out, id, kRpcError, static_cast<uint32_t>(body.size()));
        out->append(body);
    }

    // Both threads may write (the reader only for calls it could not start).
    void Write(const std::string& data) {
        std::lock_guard<std::mutex> lock(write_mutex_);
        size_t sent = 0;
        while (sent < data.size() && !broken_) {
            const ssize_t n = send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (n > 0) {
                sent += static_cast<size_t>(n);
            } else if (errno != EINTR) {
                broken_ = true;  // the Locust side is gone: the reader sees EOF and ends us
            }
        }
    }

    int fd_;
    grpc::GenericStub stub_;
    grpc::CompletionQueue queue_;
    std::mutex calls_mutex_;
    std::unordered_set<Call*> in_flight_;
    std::mutex write_mutex_;
    bool broken_ = false;
};

// The SDK's channel settings (triton_kit/client/transport.py GRPC_CHANNEL_ARGS).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(INT32_MAX);
    args.SetMaxReceiveMessageSize(INT32_MAX);
    args.SetInt("grpc.initial_reconnect_backoff_ms", 100);
    args.SetInt("grpc.min_reconnect_backoff_ms", 100);
    args.SetInt("grpc.max_reconnect_backoff_ms", 1000);
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    args.SetInt("grpc.keepalive_time_ms", INT32_MAX);
    args.SetInt("grpc.keepalive_timeout_ms", 20000);
    args.SetInt("grpc.keepalive_permit_without_calls", 0);
    args.SetInt("grpc.http2.max_pings_without_data", 2);
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

int Usage(const char* problem) {
    std::fprintf(stderr,
                 "triton-kit-grpc-sidecar: %s\n"
                 "usage: triton-kit-grpc-sidecar --fd N --address HOST:PORT\n"
                 "(TLS is served by the Python sidecar, python -m triton_kit.loadtest.sidecar.server)\n",
                 problem);
    return 2;
}

bool ParseArgs(int argc, char** argv, Options* options, std::string* problem) {
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--ssl") {
            *problem = "--ssl: this sidecar has no TLS";
            return false;
        }
        if (i + 1 >= argc || (flag != "--fd" && flag != "--address")) {
            *problem = "unknown or incomplete argument " + flag;
            return false;
        }
        const std::string value = argv[++i];
        if (flag == "--fd") {
            options->fd = std::atoi(value.c_str());
        } else {
            options->address = value;
        }
    }
    if (options->fd < 0 || options->address.empty()) {
        *problem = "--fd and --address are required";
        return false;
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    std::string problem;
    if (!ParseArgs(argc, argv, &options, &problem)) return Usage(problem.c_str());
    // Ctrl-C reaches the whole process group: Locust shuts down and closes our socket,
    // and the end of the socket is what ends this process.
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGPIPE, SIG_IGN);
    // gevent hands over its end non-blocking; this process blocks in its two threads.
    const int flags = fcntl(options.fd, F_GETFL);
    if (flags < 0 || fcntl(options.fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        std::perror("triton-kit-grpc-sidecar: --fd");
        return 2;
    }
    Sidecar sidecar(options.fd, MakeChannel(options.address));
    return sidecar.Run();
}
