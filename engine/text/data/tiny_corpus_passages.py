"""Passages of our own writing for make_tiny_corpus.py (see its docstring)."""

PROSE = [
    """Serving a large language model is mostly bookkeeping. The model itself is a fixed function from
a sequence of tokens to a distribution over the next token; the server decides which requests run
together, where their keys and values live, and when a request is finished. A good scheduler keeps
the accelerator busy without letting any single request wait too long.""",
    """Prefill and decode have different shapes. Prefill reads the whole prompt at once and is limited
by arithmetic, while decode produces one token per step and is limited by how fast the weights and
the cache can be read from memory. Running them on separate pools lets each pool choose its own
precision: the prefill pool keeps a BF16 cache, the decode pool stores FP8 pages and holds twice
as many tokens.""",
    """A mixture-of-experts layer sends every token to a few experts out of many. The router scores each
expert, adds a small correction bias, keeps the best groups and then the best experts inside them.
Only the chosen experts run, so the model has a trillion parameters but each token touches a few
billion of them.""",
    """The key-value cache is divided into pages of a fixed number of tokens. A request owns a list of
pages in logical order, and the attention kernel reads them through that list. When a request ends,
its pages go back to the pool. If a page is given to a new request while an old transfer is still
writing into it, the new request would read someone else's data, so every page carries a
generation counter and every step checks it.""",
    """Quantization trades a little accuracy for a lot of memory. Eight-bit floating point weights use
one scale for each block of 128 by 128 values; four-bit integer weights use one scale for each group
of 32 values along the input dimension. The routed experts hold most of the parameters, so they are
the first to be quantized, while attention and the shared expert stay in higher precision.""",
    """Tokenization turns text into integers. A byte-level tokenizer first splits the text into pieces
with a regular expression, then merges the bytes of each piece into larger tokens, always choosing
the pair with the lowest rank. Because every byte is a token, any string can be encoded, and decoding
the tokens gives back exactly the original bytes.""",
    """When a stream of tokens is turned back into text, a token may end in the middle of a character.
The detokenizer keeps the incomplete bytes until the rest of the character arrives, so the client
never sees half of a Chinese character or a broken emoji.""",
    """The controller watches ModelDeployment objects and creates two pools for each: one for prefill
and one for decode. Each pool becomes a StatefulSet with a headless Service. The autoscaler reads
the agents' metrics, such as the number of waiting requests and the cache usage, and changes the
number of replicas when the load changes.""",
    """To reproduce a result, write down everything that can change it: the commit, the compiler, the
flags, the input, the seed and the machine. Then run it twice. If the two runs disagree, the
difference is the first bug to fix.""",
    """A unit test should fail for exactly one reason and say which. It should not sleep, it should not
depend on the time of day, and it should not need the network. When a test is slow, it usually
tests too much at once; split it until each part is quick and clear.""",
    """Good error messages name the thing that went wrong and what was expected. "tensor 'lm_head.weight':
shape [64, 128], expected [4096, 128]" tells the reader where to look; "invalid input" does not.""",
    """The weather today is mild and clear, with a light wind from the west. Tomorrow will be cooler,
with clouds in the morning and rain in the afternoon. Take an umbrella if you go out after lunch.""",
    """She opened the window, made a cup of tea and sat down to read. The book was about a sailor who
crossed the ocean alone in a small boat. Every evening he wrote a few lines in his journal: the
wind, the waves, the birds he saw, and how many miles were left.""",
    """To bake bread, mix flour, water, salt and yeast. Knead the dough for ten minutes, let it rise for
an hour, shape it, let it rise again and bake it at 230 degrees for about forty minutes, until the
crust is dark and the loaf sounds hollow when you tap it.""",
    """The history of computing is a history of making machines easier to tell what to do. First there
were switches and cables, then punched cards, then assemblers and compilers, and now we ask in plain
language and the machine writes the program for us.""",
    """Please summarize the following document in three sentences. Keep the names and the numbers, and
do not add anything that is not in the text. If something is unclear, say so instead of guessing.""",
    """Thank you for your message. I have checked the logs and the error started at 14:32 UTC, when the
new version was deployed. I rolled it back at 14:51 and the error rate returned to normal. I will
write a short report and add a test so that this does not happen again.""",
    """Why is the sky blue? Sunlight contains every color, but the air scatters short wavelengths much
more than long ones. Blue light is scattered across the whole sky, so wherever we look, some of it
reaches our eyes. At sunset the light travels through more air, the blue is scattered away, and the
sky turns orange and red.""",
    """A function should do one thing. Its name should say what that thing is, its arguments should be
few, and its result should not depend on hidden state. Such functions are easy to test, easy to
reuse and easy to delete when they are no longer needed.""",
    """The meeting is moved to Thursday at 10 am. We will review the benchmark results, decide which
kernels to optimize first, and plan the release. Please send your notes by Wednesday evening.""",
]

CHAT = [
    """system
You are a helpful assistant. Answer briefly and accurately.
user
What is the capital of France?
assistant
The capital of France is Paris.""",
    """user
Can you explain what a transformer is in one paragraph?
assistant
A transformer is a neural network that reads a sequence of tokens and, at every layer, lets each
token look at the others through attention. Attention weighs how relevant every other token is,
mixes their information, and then a small feed-forward network transforms the result. Stacking
many such layers lets the model learn grammar, facts and reasoning from text.""",
    """user
What's the weather like in Tokyo this week?
assistant
Let me check the forecast for you.
tool
## Return of functions.get_weather:0
{"city": "Tokyo", "forecast": [{"day": "Monday", "high": 18, "low": 11, "sky": "sunny"}, {"day": "Tuesday", "high": 16, "low": 10, "sky": "rain"}]}
assistant
Tokyo will be sunny on Monday with a high of 18 °C, and rainy on Tuesday with a high of 16 °C.""",
    """user
Write a haiku about the ocean.
assistant
Grey waves fold and break,
salt wind carries gull voices,
the tide keeps its time.""",
    """user
How do I reverse a list in Python?
assistant
Use slicing, `items[::-1]`, to get a reversed copy, or call `items.reverse()` to reverse the list in
place. If you only need to iterate backwards, `reversed(items)` avoids making a copy.""",
    """user
Translate "good morning, how are you?" into Spanish, French and German.
assistant
Spanish: "Buenos días, ¿cómo estás?"
French: "Bonjour, comment vas-tu ?"
German: "Guten Morgen, wie geht es dir?\"""",
    """user
I have 3 apples and I buy 5 more, then I eat 2. How many apples do I have?
assistant
You start with 3, buy 5 to make 8, and eat 2, so you have 6 apples left.""",
    """user
Please find the latest release notes and summarize them.
assistant
I'll search for them first.
tool
## Return of functions.search_web:0
[{"title": "Release 2.4.0", "url": "https://example.com/releases/2.4.0", "snippet": "Faster decoding, FP8 cache, bug fixes"}]
assistant
Release 2.4.0 brings faster decoding, an FP8 key-value cache and a set of bug fixes.""",
    """user
Is 97 a prime number?
assistant
Yes. 97 is not divisible by 2, 3, 5 or 7, and since 10 × 10 = 100 is larger than 97, no other
divisor needs to be checked, so 97 is prime.""",
    """user
Give me three tips for writing clear documentation.
assistant
1. Start with what the reader wants to do, not with how the code works.
2. Show a complete, working example early.
3. Keep each page short and link to the details instead of repeating them.""",
    """tool_declare
[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}}, "required": ["city"]}}}]""",
    """You are Kimi, an AI assistant created by Moonshot AI.
user
Hello! Who are you?
assistant
Hello! I am an AI assistant. I can answer questions, write and explain code, translate text and
call tools when they are available. How can I help you today?""",
]

CODE = [
    """#include <cstdio>
#include <vector>

int main() {
  std::vector<int> values = {3, 1, 4, 1, 5, 9, 2, 6};
  long sum = 0;
  for (int v : values) sum += v;
  std::printf("sum = %ld, mean = %.2f\\n", sum, static_cast<double>(sum) / values.size());
  return 0;
}""",
    """Status PagePool::Free(PageId page) {
  if (page >= num_pages_) return Status::InvalidArgument("page " + std::to_string(page) + " out of range");
  if (!in_use_[page]) return Status::FailedPrecondition("page freed twice");
  in_use_[page] = false;
  ++generation_[page];
  free_list_.push_back(page);
  return Status::Ok();
}""",
    """def softmax(xs):
    m = max(xs)
    exps = [math.exp(x - m) for x in xs]
    total = sum(exps)
    return [e / total for e in exps]


class Counter:
    def __init__(self):
        self.counts = {}

    def add(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n
        return self.counts[key]""",
    """import json
import sys

def main(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for item in data.get("items", []):
        print(f"{item['name']:20s} {item['count']:>8d}")

if __name__ == "__main__":
    main(sys.argv[1])""",
    """fn main() {
    let words = vec!["alpha", "beta", "gamma"];
    for (i, w) in words.iter().enumerate() {
        println!("{}: {}", i, w.to_uppercase());
    }
}""",
    """package main

import "fmt"

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func main() {
	fmt.Println(fib(20))
}""",
    """#!/usr/bin/env bash
set -euo pipefail
for f in logs/*.txt; do
  echo "== $f"
  grep -c ERROR "$f" || true
done
tar -czf logs.tar.gz logs/""",
    """apiVersion: tandem.dev/v1alpha1
kind: ModelDeployment
metadata:
  name: kimi-k2
spec:
  model:
    name: moonshotai/Kimi-K2.6
    path: /models/kimi-k2.6
  prefill:
    replicas: 2
    weights: fp8
    kvCache: bf16
  decode:
    replicas: 2
    weights: int4
    kvCache: fp8_e4m3""",
    """{"model": "tiny", "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hello!"}], "max_tokens": 64, "temperature": 0.7, "stream": true}""",
    """{"id": "chatcmpl-42", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 57, "completion_tokens": 18, "total_tokens": 75}}""",
    """SELECT user_id, COUNT(*) AS requests, AVG(latency_ms) AS mean_latency
FROM requests
WHERE created_at >= '2026-01-01' AND status = 'ok'
GROUP BY user_id
ORDER BY requests DESC
LIMIT 10;""",
    """# Building

```sh
cmake -S . -B build -G Ninja
cmake --build build
ctest --test-dir build --output-on-failure
```

| target | what it builds |
|---|---|
| `tandem` | the command line |
| `tandem-agent` | the per-node agent |""",
    """<html>
  <body>
    <h1>Hello, world</h1>
    <p class="note">This page was generated at <time>2026-12-01</time>.</p>
  </body>
</html>""",
    """const total = items.reduce((acc, item) => acc + item.price * item.quantity, 0);
console.log(`Total: ${total.toFixed(2)} EUR`);
export function isEmpty(obj) { return Object.keys(obj).length === 0; }""",
]

SCRIPTS = [
    "今天早上我去市场买了一些水果和蔬菜。苹果很新鲜，价格也不贵。回家以后，我做了一顿简单的午饭。",
    "大型语言模型的推理需要大量的内存。把权重量化成八位或四位，可以在同一块显卡上放下更多的请求。",
    "请用三句话总结这篇文章，并保留其中的数字和人名。如果有不清楚的地方，请直接说明。",
    "北京是中国的首都，上海是最大的城市。长江是亚洲最长的河流，全长约六千三百公里。",
    "我们明天下午三点在会议室开会，讨论新版本的发布计划。请大家提前准备好材料。",
    "机器学习是人工智能的一个分支。它让计算机从数据中学习规律，而不需要人为地写出每一条规则。",
    "こんにちは。今日はとても良い天気ですね。午後は友達と公園で散歩する予定です。",
    "このプログラムは入力されたテキストをトークンに分割し、それぞれのトークンを番号に変換します。",
    "日本の首都は東京です。富士山は日本で一番高い山で、高さは三千七百七十六メートルです。",
    "안녕하세요. 오늘 날씨가 정말 좋네요. 주말에는 가족과 함께 바다에 갈 계획입니다.",
    "이 모델은 사용자의 질문에 답하고, 코드를 설명하고, 필요할 때 도구를 호출할 수 있습니다.",
    "สวัสดีครับ วันนี้อากาศดีมาก เราจะไปเที่ยวตลาดน้ำกันตอนเช้า แล้วกินข้าวกลางวันที่ร้านริมแม่น้ำ",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย มีวัดที่สวยงามและอาหารอร่อยมากมาย",
    "ภาษาไทยเขียนติดกันโดยไม่เว้นวรรคระหว่างคำ ตัวตัดคำจึงต้องรู้จักคำศัพท์จำนวนมาก",
    "مرحبا بك. كيف حالك اليوم؟ الطقس جميل ونريد أن نذهب إلى الحديقة بعد الظهر.",
    "النموذج اللغوي الكبير يتعلم من النصوص ويستطيع أن يجيب عن الأسئلة ويكتب البرامج.",
    "القاهرة هي عاصمة مصر، ونهر النيل هو أطول نهر في أفريقيا.",
    "שלום, מה שלומך? היום יום יפה ואנחנו הולכים לים אחרי הצהריים.",
    "המחשב קורא את הטקסט, מחלק אותו למילים וממיר כל מילה למספר.",
    "नमस्ते, आप कैसे हैं? आज मौसम बहुत अच्छा है और हम शाम को बाज़ार जाएंगे।",
    "यह मॉडल प्रश्नों के उत्तर दे सकता है, कोड समझा सकता है और पाठ का अनुवाद कर सकता है।",
    "Привет! Как дела? Сегодня хорошая погода, и мы пойдём гулять в парк после обеда.",
    "Большие языковые модели обучаются на огромном количестве текстов и умеют отвечать на вопросы.",
    "Сервер принимает запрос, разбивает текст на токены и возвращает ответ по одному токену за шаг.",
    "Γεια σου! Τι κάνεις; Σήμερα ο καιρός είναι υπέροχος και θα πάμε στη θάλασσα.",
    "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και μία από τις αρχαιότερες πόλεις του κόσμου.",
    "Xin chào! Hôm nay trời đẹp quá. Chúng tôi sẽ đi dạo ở hồ Hoàn Kiếm vào buổi chiều.",
    "Mô hình ngôn ngữ lớn có thể trả lời câu hỏi, viết mã và dịch văn bản sang nhiều ngôn ngữ.",
    "Guten Tag! Wie geht es Ihnen? Heute ist das Wetter schön, und wir gehen am Nachmittag spazieren.",
    "Das Modell beantwortet Fragen, erklärt Programme und übersetzt Texte in viele Sprachen.",
    "Bonjour ! Comment allez-vous ? Aujourd'hui il fait beau, nous irons nous promener au parc.",
    "Le serveur découpe le texte en jetons et renvoie la réponse un jeton à la fois.",
    "¡Hola! ¿Qué tal estás? Hoy hace buen tiempo y vamos a pasear por la playa después de comer.",
    "El modelo responde preguntas, escribe código y traduce textos a muchos idiomas.",
    "Olá! Como você está? Hoje o dia está lindo e vamos à praia depois do almoço.",
    "Merhaba! Nasılsın? Bugün hava çok güzel, öğleden sonra sahilde yürüyüş yapacağız.",
    "Cześć! Jak się masz? Dzisiaj jest piękna pogoda, pójdziemy na spacer nad rzekę.",
    "Hej! Hur mår du? I dag är vädret fint och vi ska gå till sjön efter lunch.",
    "Ciao! Come stai? Oggi il tempo è bello e andiamo a fare una passeggiata in centro.",
    "Hallo! Hoe gaat het? Vandaag is het mooi weer en we gaan fietsen langs de rivier.",
    "Habari! Leo hali ya hewa ni nzuri, tutaenda sokoni mchana.",
    "🎉 Congratulations on the release! 🚀🚀 Thanks to everyone who helped 🙏❤️",
    "Status: ✅ build passed, ⚠️ 2 warnings, ❌ 0 failures ⏱️ 3m 12s 📦 42 MB",
    "I love this 😂😂😂 it made my day 🌞🌈✨ see you soon 👋🐱🐶",
    "→ ← ↑ ↓ ∑ ∫ √ ∞ ≈ ≠ ≤ ≥ ± × ÷ ° € £ ¥ © ® ™ § ¶ • … — – « » “ ” ‘ ’",
]
