#!/usr/bin/env python3
"""A synthetic tool-calling corpus for the small trained model (tools/train/train_tool_model.py).

Tools from many domains with typed parameters (strings, integers, numbers, booleans, enums,
arrays, a nested object), each with request templates whose slots fill its arguments. A sample
offers 1-4 tools (the right one among others) and asks for one call, two calls (parallel), or no
call at all (small talk, or a request none of the offered tools can serve). Samples are
conversations in OpenAI chat form plus the expected calls in `tandem eval` suite form (BFCL's
possible answers: each argument a list of accepted values; an optional argument the request does not
mention is [""], to be left out). Fully determined by the seed. Nothing here comes from BFCL.

Usage (as a module): samples(seed, n, contrast=0) -> [Sample]; as a script: tool_corpus.py --seed 1 --n 5
"""
import argparse
import json
import random

CITIES = ["Paris", "Oslo", "Tokyo", "Lima", "Cairo", "Sydney", "Toronto", "Berlin", "Madrid", "Rome", "Lisbon",
          "Dublin", "Vienna", "Prague", "Warsaw", "Athens", "Istanbul", "Dubai", "Mumbai", "Delhi", "Bangkok",
          "Seoul", "Beijing", "Shanghai", "Singapore", "Jakarta", "Manila", "Nairobi", "Lagos", "Accra",
          "Casablanca", "Tunis", "Boston", "Chicago", "Denver", "Seattle", "Austin", "Miami", "Phoenix",
          "Atlanta", "Houston", "Dallas", "Montreal", "Vancouver", "Calgary", "Havana", "Bogota", "Quito",
          "Santiago", "Caracas", "Helsinki", "Stockholm", "Copenhagen", "Reykjavik", "Zurich", "Geneva",
          "Munich", "Hamburg", "Milan", "Naples", "Porto", "Seville", "Valencia", "Krakow", "Budapest",
          "Bucharest", "Sofia", "Riga", "Tallinn", "Vilnius", "Kyiv", "Tbilisi", "Baku", "Doha", "Muscat",
          "Hanoi", "Osaka", "Kyoto", "Perth", "Auckland", "Wellington"]
NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jamal", "Kofi", "Lena",
         "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wei", "Ximena",
         "Yara", "Zane", "Anika", "Bruno", "Chen", "Dana", "Elif", "Finn", "Gita", "Hugo", "Ivan", "Julia",
         "Kenji", "Lucia", "Marco", "Nora", "Oscar", "Paula", "Rami", "Sofia", "Tomas", "Ulla", "Viktor"]
SURNAMES = ["Smith", "Garcia", "Chen", "Okafor", "Silva", "Kowalski", "Nguyen", "Haddad", "Muller", "Rossi",
            "Tanaka", "Ivanova", "Larsen", "Dubois", "Kumar", "Mendes", "Novak", "Popescu", "Yilmaz", "Costa"]
CURRENCIES = ["USD", "EUR", "JPY", "GBP", "CHF", "CAD", "AUD", "CNY", "INR", "BRL", "MXN", "SEK", "NOK", "KRW"]
LANGUAGES = ["French", "German", "Spanish", "Italian", "Japanese", "Korean", "Chinese", "Portuguese", "Arabic",
             "Hindi", "Dutch", "Swedish", "Turkish", "Polish"]
PHRASES = ["good morning", "where is the station", "thank you very much", "how much does it cost",
           "I would like a coffee", "see you tomorrow", "the meeting is at noon", "happy birthday",
           "can you help me", "the train is late", "I love this city", "please call me back"]
TOPICS = ["the quarterly report", "the team lunch", "project kickoff", "budget review", "the launch plan",
          "hiring update", "the design review", "travel plans", "the offsite", "customer feedback"]
SONGS = ["Blue Sky", "Night Drive", "Paper Boats", "Golden Hour", "Slow River", "Neon Rain", "Silver Lines",
         "Open Road", "Quiet Storm", "Summer Glow", "Falling Leaves", "City Lights"]
ARTISTS = ["The Wanderers", "Mila Stone", "Echo Park", "Nova Bay", "Red Harbor", "Luna Vega", "The Static",
           "Juniper", "Arlo Finch", "Cedar & Pine"]
DISHES = ["lasagna", "pad thai", "ramen", "paella", "tacos", "risotto", "curry", "pancakes", "falafel",
          "dumplings", "gumbo", "shakshuka", "pho", "moussaka"]
PRODUCTS = ["laptop", "headphones", "coffee maker", "desk lamp", "backpack", "keyboard", "monitor", "camera",
            "running shoes", "water bottle", "phone case", "office chair"]
STOCKS = ["AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "TSLA", "META", "NFLX", "IBM", "ORCL", "INTC", "AMD"]
TEAMS = ["Lions", "Tigers", "Falcons", "Sharks", "Wolves", "Bears", "Eagles", "Hawks", "Rangers", "Comets"]
ROOMS = ["kitchen", "living room", "bedroom", "office", "garage", "hallway", "bathroom", "basement"]
UNITS_LEN = ["meters", "feet", "kilometers", "miles", "inches", "centimeters"]
GENRES = ["jazz", "rock", "classical", "pop", "hip hop", "ambient", "folk", "blues"]
PACKAGES = ["1Z999AA10123456784", "9400111899223197428490", "JD014600006281234567", "LX123456789CN",
            "7489201183746501", "RB554432101GB"]


SYLLABLES = ["ka", "ve", "lo", "mi", "ra", "to", "sen", "dor", "an", "bel", "qu", "zi", "mar", "tel", "ou", "ni",
             "pra", "gol", "fe", "ru", "sta", "vin", "cor", "ly", "ash", "dun", "ex", "ho", "ji", "wen"]


def coined(rng, syllables=(2, 3)):
    """A made-up word ("Velmora"): values the model can only get right by copying them from the
    request, never by remembering a list."""
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(*syllables))).capitalize()


def pick(rng, items, make):
    """An item of the list, or (four times in ten) a coined value."""
    return make() if rng.random() < 0.4 else rng.choice(items)


def email(rng):
    return "%s.%s@example.com" % (rng.choice(NAMES).lower(), rng.choice(SURNAMES).lower())


def date(rng):
    return "2026-%02d-%02d" % (rng.randint(1, 12), rng.randint(1, 28))


def clock(rng):
    return "%02d:%02d" % (rng.randint(6, 21), rng.choice([0, 15, 30, 45]))


def money(rng):
    return rng.choice([round(rng.uniform(1, 999), 2), rng.randint(5, 5000)])


# ------------------------------------------------------------------------------------- the tools
# Each tool: name, description, parameters [(name, schema, required)], and templates: (text, fixed
# arguments) where {slot} fills the argument of that name from SLOTS (a draw per sample) and fixed
# arguments (booleans, enum values said in words) are added as they are.

def P(name, schema, required=True):
    return (name, schema, required)


S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}


def E(*values):
    return {"type": "string", "enum": list(values)}


def A(items):
    return {"type": "array", "items": items}


def D(text, schema):
    return dict(schema, description=text)


TOOLS = [
    ("get_weather", "Get the current weather in a city.",
     [P("city", D("City name", S)), P("unit", D("Temperature unit", E("celsius", "fahrenheit")), False)],
     [("What's the weather in {city}?", {}), ("How is the weather in {city} today?", {}),
      ("Weather in {city} in {unit}, please.", {}), ("Is it raining in {city}?", {}),
      ("Tell me the temperature in {city} in {unit}.", {}), ("Check the weather for {city}.", {})]),
    ("get_forecast", "Get a multi-day weather forecast.",
     [P("city", D("City name", S)), P("days", D("Number of days, 1 to 10", dict(I, minimum=1, maximum=10)))],
     [("Give me the {days}-day forecast for {city}.", {}), ("What will the weather be in {city} over the next {days} days?", {}),
      ("Forecast for {city}, {days} days.", {})]),
    ("convert_currency", "Convert an amount from one currency to another.",
     [P("amount", D("Amount to convert", N)), P("from_currency", D("ISO code", S)), P("to_currency", D("ISO code", S))],
     [("Convert {amount} {from_currency} to {to_currency}.", {}), ("How much is {amount} {from_currency} in {to_currency}?", {}),
      ("Change {amount} {from_currency} into {to_currency} for me.", {})]),
    ("get_exchange_rate", "Get the exchange rate between two currencies.",
     [P("base", D("ISO code", S)), P("quote", D("ISO code", S))],
     [("What is the exchange rate from {base} to {quote}?", {}), ("{base} to {quote} rate?", {}),
      ("Show me the current {base}/{quote} exchange rate.", {})]),
    ("send_email", "Send an email.",
     [P("to", D("Recipient addresses", dict(A(S), minItems=1))), P("subject", D("Subject line", S)),
      P("urgent", D("Mark as urgent", B), False)],
     [("Email {to} about {subject}.", {}), ("Send an email to {to} with the subject {subject}.", {}),
      ("Send an urgent email to {to} about {subject}.", {"urgent": True}),
      ("Write to {to}, subject: {subject}.", {})]),
    ("create_event", "Create a calendar event.",
     [P("title", D("Event title", S)), P("date", D("Date, YYYY-MM-DD", S)), P("time", D("Start time, HH:MM", S), False),
      P("duration_minutes", D("Length in minutes", dict(I, minimum=5)), False)],
     [("Schedule {title} on {date} at {time}.", {}), ("Add {title} to my calendar for {date}.", {}),
      ("Create an event called {title} on {date} at {time} for {duration_minutes} minutes.", {}),
      ("Put {title} on {date}, {duration_minutes} minutes long.", {})]),
    ("set_timer", "Start a countdown timer.",
     [P("minutes", D("Minutes", dict(I, minimum=1, maximum=600))), P("label", D("Timer name", S), False)],
     [("Set a timer for {minutes} minutes.", {}), ("Start a {minutes} minute timer called {label}.", {}),
      ("Timer: {minutes} minutes for the {label}.", {})]),
    ("set_reminder", "Set a reminder at a date and time.",
     [P("text", D("What to remember", S)), P("date", D("Date, YYYY-MM-DD", S)), P("time", D("Time, HH:MM", S))],
     [("Remind me to {text} on {date} at {time}.", {}), ("Set a reminder for {date} at {time}: {text}.", {})]),
    ("translate_text", "Translate text into another language.",
     [P("text", D("Text to translate", S)), P("target_language", D("Language to translate into", E(*LANGUAGES)))],
     [("Translate '{text}' into {target_language}.", {}), ("How do you say '{text}' in {target_language}?", {}),
      ("Say '{text}' in {target_language}.", {})]),
    ("play_music", "Play a song, optionally by a given artist.",
     [P("song", D("Song title", S)), P("artist", D("Artist name", S), False), P("shuffle", D("Shuffle after", B), False)],
     [("Play {song}.", {}), ("Play {song} by {artist}.", {}), ("Put on {song} by {artist} and shuffle after.", {"shuffle": True}),
      ("I want to hear {song}.", {})]),
    ("play_genre", "Play music of a genre.",
     [P("genre", D("Music genre", E(*GENRES))), P("volume", D("Volume 0-100", dict(I, minimum=0, maximum=100)), False)],
     [("Play some {genre}.", {}), ("Put on {genre} music at volume {volume}.", {}), ("I feel like {genre}.", {})]),
    ("get_stock_price", "Get the latest price of a stock.",
     [P("symbol", D("Ticker symbol", S))],
     [("What is {symbol} trading at?", {}), ("Stock price of {symbol}?", {}), ("How much is one share of {symbol}?", {})]),
    ("search_recipes", "Find recipes for a dish.",
     [P("dish", D("Dish name", S)), P("max_minutes", D("Longest cooking time in minutes", I), False),
      P("vegetarian", D("Vegetarian only", B), False)],
     [("Find me a recipe for {dish}.", {}), ("How do I make {dish} in under {max_minutes} minutes?", {}),
      ("Vegetarian {dish} recipes, please.", {"vegetarian": True}), ("Recipe for {dish}?", {})]),
    ("book_table", "Book a restaurant table.",
     [P("restaurant", D("Restaurant name", S)), P("people", D("Party size", dict(I, minimum=1, maximum=20))),
      P("date", D("Date, YYYY-MM-DD", S)), P("time", D("Time, HH:MM", S))],
     [("Book a table at {restaurant} for {people} on {date} at {time}.", {}),
      ("Reserve {restaurant} for {people} people, {date} at {time}.", {})]),
    ("book_flight", "Book a one-way flight.",
     [P("origin", D("Departure city", S)), P("destination", D("Arrival city", S)), P("date", D("Date, YYYY-MM-DD", S)),
      P("cabin", D("Cabin class", E("economy", "premium", "business", "first")), False)],
     [("Book a flight from {origin} to {destination} on {date}.", {}),
      ("Fly me from {origin} to {destination} on {date} in {cabin}.", {}),
      ("I need a {cabin} ticket from {origin} to {destination} on {date}.", {})]),
    ("find_hotels", "Search hotels in a city.",
     [P("city", D("City", S)), P("check_in", D("Date, YYYY-MM-DD", S)), P("nights", D("Nights", dict(I, minimum=1))),
      P("max_price", D("Highest price per night", N), False)],
     [("Find hotels in {city} from {check_in} for {nights} nights.", {}),
      ("Hotels in {city}, check in {check_in}, {nights} nights, under {max_price} a night.", {})]),
    ("get_directions", "Get directions between two places.",
     [P("start", D("Starting place", S)), P("end", D("Destination", S)),
      P("mode", D("Travel mode", E("driving", "walking", "cycling", "transit")), False)],
     [("How do I get from {start} to {end}?", {}), ("Directions from {start} to {end} by {mode}.", {}),
      ("Route from {start} to {end}, {mode}.", {})]),
    ("track_package", "Track a parcel by its tracking number.",
     [P("tracking_number", D("Tracking number", S))],
     [("Where is my package {tracking_number}?", {}), ("Track {tracking_number}.", {}),
      ("Status of parcel {tracking_number}?", {})]),
    ("set_thermostat", "Set the thermostat in a room.",
     [P("room", D("Room", S)), P("temperature", D("Target in degrees", N))],
     [("Set the {room} to {temperature} degrees.", {}), ("Make the {room} {temperature} degrees.", {}),
      ("Thermostat in the {room}: {temperature}.", {})]),
    ("control_lights", "Turn lights on or off in a room.",
     [P("room", D("Room", S)), P("on", D("True to switch on", B)),
      P("brightness", D("Brightness 0-100", dict(I, minimum=0, maximum=100)), False)],
     [("Turn on the lights in the {room}.", {"on": True}), ("Switch off the {room} lights.", {"on": False}),
      ("Lights in the {room} on at {brightness} percent.", {"on": True}), ("Turn the {room} lights off.", {"on": False})]),
    ("get_sports_score", "Get the latest score of a team.",
     [P("team", D("Team name", S)), P("league", D("League", E("football", "basketball", "hockey", "baseball")), False)],
     [("How did the {team} do?", {}), ("Latest {league} score for the {team}?", {}), ("Did the {team} win?", {})]),
    ("search_products", "Search an online shop.",
     [P("query", D("What to look for", S)), P("max_price", D("Highest price", N), False),
      P("sort", D("Order", E("price", "rating", "newest")), False)],
     [("Find a {query}.", {}), ("Search for a {query} under {max_price}.", {}),
      ("Show me {query} deals sorted by {sort}.", {}), ("Look for a {query} under {max_price}, sorted by {sort}.", {})]),
    ("add_to_cart", "Add a product to the shopping cart.",
     [P("product", D("Product", S)), P("quantity", D("How many", dict(I, minimum=1)))],
     [("Add {quantity} {product} to my cart.", {}), ("Put {quantity} of the {product} in the cart.", {})]),
    ("create_contact", "Save a contact with an address.",
     [P("name", D("Full name", S)), P("phone", D("Phone number", S), False),
      P("address", D("Postal address", {"type": "object", "properties": {"city": S, "street": S},
                                          "required": ["city"]}), False)],
     [("Save {name} with phone {phone}.", {}), ("Add a contact {name} living at {street} in {city}.", {}),
      ("New contact: {name}, {phone}, {city}.", {})]),
    ("calculate_tip", "Work out a tip.",
     [P("bill", D("Bill amount", N)), P("percent", D("Tip percent", dict(N, minimum=0, maximum=100)))],
     [("What is a {percent} percent tip on {bill}?", {}), ("Tip {percent}% of {bill}.", {}),
      ("Calculate the tip for a {bill} bill at {percent} percent.", {})]),
    ("convert_length", "Convert a length between units.",
     [P("value", D("Value", N)), P("from_unit", D("Unit", E(*UNITS_LEN))), P("to_unit", D("Unit", E(*UNITS_LEN)))],
     [("Convert {value} {from_unit} to {to_unit}.", {}), ("How many {to_unit} is {value} {from_unit}?", {})]),
    ("get_news", "Get top news headlines.",
     [P("topic", D("Topic", E("business", "science", "sports", "technology", "health", "world"))),
      P("count", D("How many headlines", dict(I, minimum=1, maximum=20)), False)],
     [("Give me the {topic} news.", {}), ("Top {count} {topic} headlines.", {}), ("What's new in {topic}?", {})]),
    ("define_word", "Look up the meaning of a word.",
     [P("word", D("Word", S)), P("language", D("Language", E(*LANGUAGES)), False)],
     [("What does {word} mean?", {}), ("Define {word}.", {}), ("Meaning of the {language} word {word}?", {})]),
    ("split_bill", "Split a bill between people.",
     [P("total", D("Total amount", N)), P("people", D("Number of people", dict(I, minimum=2))),
      P("names", D("Who pays", A(S)), False)],
     [("Split {total} between {people} people.", {}), ("Divide a {total} bill among {people} people: {names}.", {}),
      ("{people} of us owe {total}, split it.", {})]),
    ("order_taxi", "Order a taxi.",
     [P("pickup", D("Pickup address", S)), P("destination", D("Where to", S)),
      P("passengers", D("Passengers", dict(I, minimum=1, maximum=8)), False)],
     [("Get me a taxi from {pickup} to {destination}.", {}), ("Taxi for {passengers} from {pickup} to {destination}.", {})]),
]

STREETS = ["Main Street", "Oak Avenue", "Harbor Road", "Elm Street", "Park Lane", "River Walk", "Hill Road",
           "Station Square", "Market Street", "Garden Way"]
RESTAURANTS = ["Luigi's", "The Green Fork", "Sakura House", "Casa Rosa", "Blue Door", "Le Petit Bistro",
               "Golden Dragon", "Olive Tree", "The Copper Pot", "Spice Route"]
PLACES = ["the airport", "the museum", "the central station", "the old town", "the stadium", "the harbor",
          "the university", "the city hall", "the zoo", "the market"]
WORDS = ["serendipity", "ephemeral", "ubiquitous", "resilient", "meticulous", "eloquent", "pragmatic",
         "candid", "nostalgia", "wanderlust"]
LABELS = ["pasta", "laundry", "tea", "workout", "oven", "nap", "meeting", "bread"]
TASKS = ["call mom", "water the plants", "pay rent", "buy milk", "renew my passport", "book the dentist",
         "submit the report", "pick up the kids"]


def phone(rng):
    return "+1-555-%04d" % rng.randint(0, 9999)


def list_text(items):
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def draw(rng, tool_name, slot, schema):
    """(value for the arguments, text for the request)."""
    enum = schema.get("enum")
    if enum:
        v = rng.choice(enum)
        return v, v
    t = schema.get("type")
    word = lambda: coined(rng)  # noqa: E731
    by_slot = {
        "city": lambda: pick(rng, CITIES, word), "origin": lambda: pick(rng, CITIES, word),
        "destination": lambda: pick(rng, PLACES + CITIES if tool_name == "order_taxi" else CITIES, word),
        "start": lambda: pick(rng, PLACES, lambda: "the " + word() + " gate"),
        "end": lambda: pick(rng, PLACES, lambda: "the " + word() + " tower"),
        "from_currency": lambda: rng.choice(CURRENCIES), "to_currency": lambda: rng.choice(CURRENCIES),
        "base": lambda: rng.choice(CURRENCIES), "quote": lambda: rng.choice(CURRENCIES),
        "subject": lambda: pick(rng, TOPICS, lambda: "the " + word().lower() + " plan"),
        "title": lambda: pick(rng, TOPICS, lambda: word() + " sync"),
        "date": lambda: date(rng), "check_in": lambda: date(rng), "time": lambda: clock(rng),
        "label": lambda: pick(rng, LABELS, lambda: word().lower()),
        "text": lambda: pick(rng, PHRASES if tool_name == "translate_text" else TASKS,
                             lambda: "call " + word() if tool_name != "translate_text" else "hello " + word()),
        "song": lambda: pick(rng, SONGS, lambda: word() + " " + word()), "artist": lambda: pick(rng, ARTISTS, word),
        "symbol": lambda: pick(rng, STOCKS, lambda: "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
                                                              for _ in range(rng.randint(2, 4)))),
        "dish": lambda: pick(rng, DISHES, lambda: word().lower()),
        "restaurant": lambda: pick(rng, RESTAURANTS, lambda: "The " + word() + " " + rng.choice(["Grill", "Kitchen", "House"])),
        "tracking_number": lambda: pick(rng, PACKAGES, lambda: "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ")
                                                                       for _ in range(rng.randint(10, 18)))),
        "room": lambda: rng.choice(ROOMS),
        "team": lambda: pick(rng, TEAMS, word), "query": lambda: pick(rng, PRODUCTS, lambda: word().lower() + " lamp"),
        "product": lambda: pick(rng, PRODUCTS, lambda: word().lower() + " mug"),
        "name": lambda: "%s %s" % (pick(rng, NAMES, word), pick(rng, SURNAMES, word)), "phone": lambda: phone(rng),
        "street": lambda: "%d %s" % (rng.randint(1, 300), pick(rng, STREETS, lambda: word() + " Street")),
        "word": lambda: pick(rng, WORDS, lambda: word().lower()),
        "pickup": lambda: "%d %s" % (rng.randint(1, 300), pick(rng, STREETS, lambda: word() + " Road")),
    }
    if slot in by_slot:
        v = by_slot[slot]()
        return v, v
    if t == "array":
        if slot == "to":
            items = [email(rng) if rng.random() < 0.6 else "%s@%s.org" % (coined(rng).lower(), coined(rng).lower())
                     for _ in range(rng.choice([1, 1, 2, 3]))]
        else:
            items = [pick(rng, NAMES, lambda: coined(rng)) for _ in range(rng.choice([2, 3]))]
        return items, list_text(items)
    if t == "integer":
        lo, hi = schema.get("minimum", 1), schema.get("maximum", 60)
        v = rng.randint(max(lo, 1), min(hi, 60))
        return v, str(v)
    if t == "number":
        v = money(rng) if slot in ("amount", "bill", "total", "max_price") else rng.choice(
            [rng.randint(1, 40), round(rng.uniform(1, 40), 1)])
        return v, str(v)
    raise ValueError("no value for %s.%s" % (tool_name, slot))


def tool_decl(tool):
    name, desc, params, _ = tool
    props = {p: schema for p, schema, _ in params}
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": [p for p, _, req in params if req]}}}


def fill(rng, tool):
    """One request for `tool`: (text, arguments in schema order, possible answers)."""
    name, _, params, templates = tool
    text, fixed = rng.choice(templates)
    schemas = {p: schema for p, schema, _ in params}
    values, answers = {}, {}
    for p, schema, _ in params:
        if p == "address":
            continue
        token = "{%s}" % p
        if token in text:
            v, shown = draw(rng, name, p, schema)
            text = text.replace(token, shown)
            values[p] = v
    if "{city}" in text or "{street}" in text:  # create_contact's nested address
        addr = {}
        for k in ("street", "city"):
            if "{%s}" % k in text:
                v, shown = draw(rng, name, k, S)
                text = text.replace("{%s}" % k, shown)
                addr[k] = v
        values["address"] = {k: addr[k] for k in ("city", "street") if k in addr}
    values.update(fixed)
    ordered = {p: values[p] for p, _, _ in params if p in values}
    for p, _, _ in params:
        if p in ordered:
            v = ordered[p]
            if isinstance(v, dict):
                answers[p] = [{k: [x] for k, x in v.items()}]
            else:
                answers[p] = [v]
        else:
            answers[p] = [""]
    assert all(p in ordered for p, _, req in params if req), (name, text)
    del schemas
    return text, ordered, answers


SMALL_TALK = [
    ("Hi!", "Hello! How can I help you today?"), ("Hello there.", "Hello! How can I help you today?"),
    ("Good morning!", "Good morning! How can I help you today?"), ("Thanks a lot!", "You're welcome!"),
    ("Thank you.", "You're welcome!"), ("Who are you?", "I am an assistant that can use tools for you."),
    ("What can you do?", "I can call the tools you give me, like checking the weather or sending an email."),
    ("How are you?", "I'm doing well, thank you! How can I help?"), ("Bye!", "Goodbye! Have a nice day."),
    ("Tell me a joke.", "Why did the function call cross the road? To return a value!"),
    ("Never mind.", "No problem. Let me know if you need anything."), ("Ok, great.", "Glad to help!"),
]
CANNOT = "Sorry, none of the tools I have can do that."


def call_text(calls, first_index=0):
    """Kimi K2's tool-call section for these calls (ids functions.NAME:INDEX)."""
    return [{"id": "functions.%s:%d" % (c["name"], first_index + i), "name": c["name"],
             "arguments": json.dumps(c["arguments"], ensure_ascii=False, separators=(",", ":"))}
            for i, c in enumerate(calls)]


class Sample:
    """messages (OpenAI form), tools (OpenAI declarations), the assistant's reply (content, calls) and
    the expected calls as a suite case wants them."""

    def __init__(self, kind, messages, tools, reply_content, reply_calls, expected):
        self.kind, self.messages, self.tools = kind, messages, tools
        self.reply_content, self.reply_calls, self.expected = reply_content, reply_calls, expected

    def case(self, case_id):
        return {"id": case_id, "category": self.kind, "messages": self.messages, "tools": self.tools,
                "expected": self.expected}


# Tools close enough that either would serve the other's requests: never offered in place of it.
SIMILAR = {"get_weather": "get_forecast", "get_forecast": "get_weather", "convert_currency": "get_exchange_rate",
           "get_exchange_rate": "convert_currency", "play_music": "play_genre", "play_genre": "play_music",
           "set_timer": "set_reminder", "set_reminder": "set_timer"}


def serves_other(tool, wanted):
    """True when `tool` cannot serve a request meant for `wanted`."""
    return tool is not wanted and tool[0] != SIMILAR.get(wanted[0])


def offered(rng, must, k):
    """`must` (tools) plus distractors, k tools in all, shuffled."""
    pool = [t for t in TOOLS if t not in must]
    out = list(must) + rng.sample(pool, max(0, k - len(must)))
    rng.shuffle(out)
    return out


def sample(rng):
    roll = rng.random()
    n_tools = rng.choice([1, 2, 2, 3, 3, 4])
    if roll < 0.5:  # one call
        tool = rng.choice(TOOLS)
        text, args, answers = fill(rng, tool)
        tools = offered(rng, [tool], n_tools)
        calls = [{"name": tool[0], "arguments": args}]
        return Sample("simple" if len(tools) == 1 else "multiple", [{"role": "user", "content": text}],
                      [tool_decl(t) for t in tools], "", call_text(calls), [{"name": tool[0], "arguments": answers}])
    if roll < 0.7:  # two calls: the same tool twice, or two tools
        a = rng.choice(TOOLS)
        b = a if rng.random() < 0.5 else rng.choice([t for t in TOOLS if t is not a])
        ta, args_a, ans_a = fill(rng, a)
        tb, args_b, ans_b = fill(rng, b)
        joiner = rng.choice([" Also, ", " And ", " Then "])
        text = ta + joiner + tb[0].lower() + tb[1:]
        tools = offered(rng, [a] if a is b else [a, b], max(n_tools, 1 if a is b else 2))
        calls = [{"name": a[0], "arguments": args_a}, {"name": b[0], "arguments": args_b}]
        return Sample("parallel", [{"role": "user", "content": text}], [tool_decl(t) for t in tools], "",
                      call_text(calls), [{"name": a[0], "arguments": ans_a}, {"name": b[0], "arguments": ans_b}])
    if roll < 0.85:  # a request no offered tool serves
        wanted = rng.choice(TOOLS)
        text, _, _ = fill(rng, wanted)
        tools = offered(rng, [], n_tools)
        tools = [t for t in tools if serves_other(t, wanted)] or \
            [rng.choice([t for t in TOOLS if serves_other(t, wanted)])]
        return Sample("irrelevance", [{"role": "user", "content": text}], [tool_decl(t) for t in tools], CANNOT, [], [])
    said, reply = rng.choice(SMALL_TALK)
    tools = offered(rng, [], n_tools)
    return Sample("irrelevance", [{"role": "user", "content": said}], [tool_decl(t) for t in tools], reply, [], [])


def contrast_pair(rng):
    """One request twice: with the tool it needs among the offered ones (the call), and with the same
    offer less that tool (the refusal). Only the tool list differs, so the choice between calling
    and declining has to come from reading it."""
    wanted = rng.choice(TOOLS)
    text, args, answers = fill(rng, wanted)
    tools = offered(rng, [wanted], rng.choice([1, 2, 2, 3, 3, 4]))
    others = [t for t in tools if serves_other(t, wanted)] or \
        [rng.choice([t for t in TOOLS if serves_other(t, wanted)])]
    call = Sample("simple" if len(tools) == 1 else "multiple", [{"role": "user", "content": text}],
                  [tool_decl(t) for t in tools], "", call_text([{"name": wanted[0], "arguments": args}]),
                  [{"name": wanted[0], "arguments": answers}])
    refusal = Sample("irrelevance", [{"role": "user", "content": text}], [tool_decl(t) for t in others], CANNOT,
                     [], [])
    return [call, refusal] if rng.random() < 0.5 else [refusal, call]


# A copying drill: the note's text goes into the call verbatim. Not one of TOOLS (requests for it are
# never drawn elsewhere, and it is never in the held-out suite): dense copying signal, the skill
# that every argument value needs and that a small model learns late from a few values per reply.
NOTE_TOOL = ("save_note", "Save a note with exactly this text.", [P("text", D("The note's text", S))], [])
NOTE_TEMPLATES = ["Save a note: {text}", "Note this down: {text}", "Please write down \"{text}\"",
                  "Make a note that says {text}", "Jot down: {text}."]


def copy_drill(rng):
    """A save_note request whose text (3-14 words: coined, common, names, cities, numbers) the call
    must repeat exactly; among 0-3 other offered tools."""
    parts = []
    for _ in range(rng.randint(3, 14)):
        kind = rng.random()
        if kind < 0.35:
            parts.append(coined(rng, (1, 3)).lower() if rng.random() < 0.5 else coined(rng, (1, 3)))
        elif kind < 0.55:
            parts.append(rng.choice(WORDS + LABELS + TASKS))
        elif kind < 0.75:
            parts.append(rng.choice(NAMES + SURNAMES + CITIES))
        else:
            parts.append(str(rng.randint(0, 99999)))
    text = " ".join(parts)
    tools = [tool_decl(NOTE_TOOL)] + [tool_decl(t) for t in rng.sample(TOOLS, rng.randint(0, 3))]
    rng.shuffle(tools)
    calls = [{"name": "save_note", "arguments": {"text": text}}]
    return Sample("simple" if len(tools) == 1 else "multiple",
                  [{"role": "user", "content": rng.choice(NOTE_TEMPLATES).replace("{text}", text)}], tools, "",
                  call_text(calls), [{"name": "save_note", "arguments": {"text": [text]}}])


def samples(seed, n, contrast=0.0, copy=0.0):
    """n samples from `seed`. contrast: the share of draws that are a contrast_pair (two samples);
    copy: the share that are a copy_drill. 0 and 0 give the stream the first model was trained on."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        if copy and rng.random() < copy:
            out.append(copy_drill(rng))
        elif contrast and rng.random() < contrast:
            out.extend(contrast_pair(rng))
        else:
            out.append(sample(rng))
    return out[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=5)
    args = ap.parse_args()
    for s in samples(args.seed, args.n):
        print(json.dumps({"kind": s.kind, "messages": s.messages, "reply": s.reply_content, "calls": s.reply_calls,
                          "tools": [t["function"]["name"] for t in s.tools], "expected": s.expected}))


if __name__ == "__main__":
    main()
